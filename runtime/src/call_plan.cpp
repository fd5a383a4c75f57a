#include "call_plan.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "halide_calls.hpp"
#include "kernel_args.hpp"
#include "magi2norm_build_knobs.hpp"
#include "opencl_context.hpp"
#include "overlap.hpp"

namespace magi2norm::detail {

bool aligned(const void *p, std::uintptr_t alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

// Whether the streaming-store variants can store this layout aligned, whatever its first
// element's address: rows dense and a multiple of the alignment long, every other stride of an
// axis longer than 1 a multiple of it (generators/magi2_norm_generator.cpp, require_streaming_layout).
bool streaming_layout(const KernelLayout &l, std::int64_t elem, std::int64_t alignment) {
    if (l.out_stride[0] != 1 || l.extent[0] * elem % alignment != 0) return false;
    for (int i = 1; i < 4; ++i) {
        if (l.extent[i] != 1 && l.out_stride[i] * elem % alignment != 0) return false;
    }
    return true;
}

namespace {

// Checks a grouping by sizes (M sizes, each >= 0, summing to the token count) and hands each
// modality's tokens to `group(m, first, size)`, m = 0 .. M-1, in order.
template <typename Group>
void walk_group_sizes(const NormConfig &config, const Grouping &grouping, std::int64_t tokens, Group &&group) {
    const auto &sizes = grouping.group_sizes();
    if (static_cast<std::int64_t>(sizes.size()) != config.num_modality) {
        throw Error(ErrorCode::grouping, "got " + std::to_string(sizes.size()) + " group sizes for num_modality " +
                                             std::to_string(config.num_modality));
    }
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        if (sizes[m] < 0) {
            throw Error(ErrorCode::grouping, "group size " + std::to_string(m) + " is negative (" + std::to_string(sizes[m]) + ")");
        }
    }
    std::int64_t first = 0;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        if (sizes[m] > tokens - first) {
            throw Error(ErrorCode::grouping, "group sizes sum past the token count " + std::to_string(tokens));
        }
        group(m, first, sizes[m]);
        first += sizes[m];
    }
    if (first != tokens) {
        throw Error(ErrorCode::grouping, "group sizes sum to " + std::to_string(first) + " but the input has " +
                                             std::to_string(tokens) + " tokens");
    }
}

// Whether the layout is one row with unit inner strides: the one-row form's calls.
bool one_dense_row(const KernelLayout &l) {
    return l.extent[1] == 1 && l.extent[2] == 1 && l.extent[3] == 1 && l.x_stride[0] == 1 && l.out_stride[0] == 1;
}

// Whether the paired-word form serves this layout, whatever the pointers: BF16 -> BF16 rows of
// whole blocks with unit inner strides on both sides and even strides elsewhere (whole words).
bool paired_layout(const CallPlan &p) {
    const KernelLayout &l = p.layout;
    if (p.norm->paired_scale.empty() || p.x.dtype != DType::bf16 || p.out.dtype != DType::bf16 ||
        l.extent[0] % abi::kSumLanes != 0 || l.x_stride[0] != 1 || l.out_stride[0] != 1) {
        return false;
    }
    for (int i = 1; i < 4; ++i) {
        if (l.extent[i] != 1 && (l.x_stride[i] % 2 != 0 || l.out_stride[i] % 2 != 0)) return false;
    }
    return true;
}

// `kernel` on pointers that passed their checks.
void launch(const CallPlan &p, const KernelEntry &kernel, const void *x, void *out, const std::int32_t *ids) {
    const bool paired = kernel.form == Form::paired_words;
    CallContext call{p.gpu_context, p.gpu_stream};
    if (p.backend == Backend::cpu) resolve_parallel_loop(call, p.parallel_loop, p.num_threads);
    const std::int32_t *kernel_ids = p.takes_ids ? ids : p.ids_from_sizes.empty() ? nullptr : p.ids_from_sizes.data();
    KernelArgs args(p, kernel.form, call);
    const float *scale = paired ? p.norm->paired_scale.data() : p.scale;
    if (kernel.form == Form::one_row) {
        scale += (p.takes_ids ? ids[0] : p.row_modality) * p.norm->config.num_patterns * p.norm->config.dim;
    }
    run_kernel(kernel, args, p.memory, x, scale, kernel_ids ? kernel_ids : p.zero_id, out,
               kernel.form == Form::inverse_rms ? p.inverse_rms_data : nullptr);
}

// GPU calls on host views with a negative stride: the input copied to contiguous memory, the
// kernel on copies, the result copied to the caller's view.
void launch_through_copies(const CallPlan &p, const void *x, void *out, const std::int32_t *ids) {
    std::vector<unsigned char> x_copy(static_cast<std::size_t>(p.x.count) * dtype_size(p.x.dtype));
    std::vector<unsigned char> out_copy(static_cast<std::size_t>(p.out.count) * dtype_size(p.out.dtype));
    CheckedView source = p.x;
    source.data = x;
    copy_elements(source, x_copy.data(), contiguous_dims(p.x.shape));
    launch(p, choose_kernel(p, x_copy.data(), out_copy.data()), x_copy.data(), out_copy.data(), ids);
    CheckedView result = p.out;
    result.data = out_copy.data();
    result.strides = contiguous_dims(p.out.shape);
    copy_elements(result, out, p.out.strides);
}

// What the tuning record's classes are bounded by (kernels.hpp): the norm's D and the call's
// input and output bytes (saturated: a broadcast input may count more elements than fit).
CallSize call_size(const CallPlan &p) {
    const auto bytes = [](const CheckedView &v) {
        std::int64_t b = 0;
        return __builtin_mul_overflow(v.count, static_cast<std::int64_t>(dtype_size(v.dtype)), &b) ? INT64_MAX : b;
    };
    std::int64_t total = 0;
    if (__builtin_add_overflow(bytes(p.x), bytes(p.out), &total)) total = INT64_MAX;
    return {p.norm->config.dim, total};
}

}  // namespace

// Where the views are and what runs them: the memory agrees across views and backend, and views
// of OpenCL buffers (a cl_mem is a handle: a view starts at its buffer's first byte) come with
// the host's queue and strides >= 0.
void plan_backend(CallPlan &p, const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
                  const Stream &stream) {
    p.backend = stream.backend ? *stream.backend : default_backend();
    p.memory = x.memory;
    if (x.memory != out.memory || (grouping.kind() == Grouping::Kind::ids && grouping.ids_memory() != x.memory)) {
        throw Error(ErrorCode::device, "input, output and modality ids must all be in host memory or all in device memory");
    }
    if (p.memory == Memory::device && p.backend == Backend::cpu) {
        throw Error(ErrorCode::device, "device-memory views need the cuda or opencl backend, not cpu");
    }
    p.cl_buffers = p.memory == Memory::device && p.backend == Backend::opencl;
    if (p.cl_buffers) {
        if (stream.stream == nullptr) {
            throw Error(ErrorCode::device, "views of OpenCL buffers need the host's command queue (Stream::stream)");
        }
        for (const auto &[view, what] : {std::pair{&p.x, "input"}, std::pair{&p.out, "output"}}) {
            if (has_negative_stride(*view)) {
                throw Error(ErrorCode::stride, std::string(what) + " " + shape_string(view->shape) +
                                                   " is an OpenCL buffer, which a view starts at the first byte of, so its strides must be >= 0");
            }
        }
    }
    if (p.memory == Memory::device) {
        p.gpu_context = p.cl_buffers ? (stream.context ? stream.context : opencl_queue_context(stream.stream))
                                     : resolve_cuda_context(stream.context);
        p.gpu_stream = stream.stream;
    }
}

// Where `bytes` lie in an OpenCL buffer `mem`, which must hold them all (OpenCL checks nothing
// when the kernel runs): else Error(`code`), "`what` <bytes> bytes but the OpenCL buffer holds
// <size>". Nothing is looked up for 0 bytes (an empty view's handle may be null).
Region cl_region(const void *mem, std::uint64_t bytes, ErrorCode code, const std::string &what) {
    if (bytes == 0) return {};
    const auto extent = opencl_extent(mem);
    if (bytes > extent.size) {
        throw Error(code, what + " " + std::to_string(bytes) + " bytes but the OpenCL buffer holds " + std::to_string(extent.size));
    }
    return {extent.root, extent.offset, extent.offset + bytes};
}

// The elements of a view at `data`: host addresses, or the part of its OpenCL buffer it covers
// (strides >= 0, so [0, hi) of the buffer).
Region view_region(const CallPlan &p, const CheckedView &v, const void *data, const char *what) {
    if (!p.cl_buffers) return host_region(v, data, what);
    if (v.count > 0 && data == nullptr) throw Error(ErrorCode::null_data, std::string(what) + " data pointer is null");
    Region r = cl_region(data, static_cast<std::uint64_t>(v.hi_bytes), ErrorCode::shape, std::string(what) + " view needs");
    r.elem_bytes = static_cast<std::int64_t>(dtype_size(v.dtype));
    r.shape = &v.shape;
    r.strides = &v.strides;
    return r;
}

// The grouping's kernel arguments: group starts (by sizes, up to kMaxGroups modalities), per-token
// ids made here (by sizes past that, host memory only), or the caller's ids at run time.
void plan_grouping(CallPlan &p, const NormConfig &config, const Grouping &grouping) {
    if (!p.layout.has_token_axis) {
        if (config.num_modality > 1) {
            throw Error(ErrorCode::grouping, "num_modality > 1 needs a token axis separate from the pattern axis; the input " +
                                                 shape_string(p.x.shape) + " has none");
        }
        if (grouping.kind() != Grouping::Kind::none) {
            throw Error(ErrorCode::grouping, "grouping needs a token axis; the input " + shape_string(p.x.shape) + " has none");
        }
    }
    if (config.num_modality > 1 && grouping.kind() == Grouping::Kind::none) {
        throw Error(ErrorCode::grouping, "num_modality is " + std::to_string(config.num_modality) +
                                             " but no grouping (group sizes or modality ids) was given");
    }
    p.tokens = p.layout.extent[3];
    p.group_starts.fill(std::numeric_limits<std::int32_t>::max());
    if (grouping.kind() == Grouping::Kind::ids) {
        if (grouping.num_tokens() != p.tokens) {
            throw Error(ErrorCode::grouping, "got " + std::to_string(grouping.num_tokens()) + " modality ids for " +
                                                 std::to_string(p.tokens) + " tokens");
        }
        p.checks_ids = true;
        // With one modality every id is 0 (the kernel clamps any id to [0, M)): none are passed.
        p.takes_ids = config.num_modality > 1;
        return;
    }
    if (grouping.kind() != Grouping::Kind::sizes) return;
    const bool as_starts = config.num_modality <= abi::kMaxGroups;
    if (!as_starts && p.memory == Memory::device) {
        throw Error(ErrorCode::grouping, "with device memory, grouping by sizes supports up to " +
                                             std::to_string(abi::kMaxGroups) + " modalities (num_modality is " +
                                             std::to_string(config.num_modality) + "); pass per-token ids");
    }
    if (!as_starts) p.ids_from_sizes.resize(static_cast<std::size_t>(p.tokens));
    walk_group_sizes(config, grouping, p.tokens, [&](std::size_t m, std::int64_t first, std::int64_t size) {
        if (!as_starts) {
            std::fill_n(p.ids_from_sizes.begin() + first, size, static_cast<std::int32_t>(m));
        } else if (m > 0) {
            p.group_starts[m - 1] = static_cast<std::int32_t>(first);
        }
    });
}

// Per-token ids: the pointer, its place apart from each view the call writes (the kernel writes
// them while it reads the ids), then their values where the host can read them (device ids are
// clamped to [0, M) by the kernel).
void check_ids(const CallPlan &p, const std::int32_t *ids, std::initializer_list<WrittenRegion> written) {
    if (p.tokens == 0) return;
    if (ids == nullptr) throw Error(ErrorCode::null_data, "modality ids pointer is null");
    const auto bytes = static_cast<std::uint64_t>(p.tokens) * sizeof(std::int32_t);
    const std::string what = "modality ids for " + std::to_string(p.tokens) + " tokens need";
    const Dims shape(1, p.tokens), strides(1, 1);
    Region span = p.cl_buffers ? cl_region(ids, bytes, ErrorCode::grouping, what)
                               : Region{nullptr, reinterpret_cast<std::uintptr_t>(ids), reinterpret_cast<std::uintptr_t>(ids) + bytes};
    span.elem_bytes = sizeof(std::int32_t);
    span.shape = &shape;
    span.strides = &strides;
    for (const WrittenRegion &w : written) check_disjoint(span, "modality ids", *w.region, w.what, "the kernel would overwrite ids it reads");
    if (p.memory == Memory::host) check_id_values(ids, p.tokens, p.norm->config.num_modality);
}

void check_id_values(const std::int32_t *ids, std::int64_t tokens, std::int64_t num_modality) {
    for (std::int64_t t = 0; t < tokens; ++t) {
        if (ids[t] < 0 || ids[t] >= num_modality) {
            throw Error(ErrorCode::modality_id, "token " + std::to_string(t) + " has modality id " + std::to_string(ids[t]) +
                                                    ", outside [0, " + std::to_string(num_modality) + ")");
        }
    }
}

void plan_variants(CallPlan &p) {
    const int capability = p.backend == Backend::cuda ? cuda_compute_capability(p.gpu_context) : 0;
    const CallSize size = call_size(p);
    if (p.inverse_rms) {
        // Training: the one form that writes the inverse RMS.
        p.elements[0] = find_kernel(p.backend, p.x.dtype, p.out.dtype, Form::inverse_rms, false, capability, size);
        if (p.elements[0] == nullptr) {
            throw Error(ErrorCode::device, std::string("this library has no ") + backend_name(p.backend) + " kernel for " +
                                               dtype_name(p.x.dtype) + " -> " + dtype_name(p.out.dtype) + " that writes the inverse RMS");
        }
        return;
    }
    p.elements[0] = find_kernel(p.backend, p.x.dtype, p.out.dtype, Form::elements, false, capability, size);
    if (p.elements[0] == nullptr) {
        throw Error(ErrorCode::device, std::string("this library has no ") + backend_name(p.backend) + " kernel for " +
                                           dtype_name(p.x.dtype) + " -> " + dtype_name(p.out.dtype));
    }
    if (p.backend != Backend::cpu || p.memory != Memory::host) return;
    p.out_bytes = static_cast<std::int64_t>(dtype_size(p.out.dtype));
    for (const std::int64_t e : p.layout.extent) p.out_bytes *= e;
    const int alignment = cpu_streaming_alignment();
    const bool streaming = alignment > 0 && streaming_layout(p.layout, static_cast<std::int64_t>(dtype_size(p.out.dtype)), alignment);
    if (streaming) p.elements[1] = find_kernel(p.backend, p.x.dtype, p.out.dtype, Form::elements, true, 0, size);
    if (one_dense_row(p.layout)) {
        p.one_row = find_kernel(p.backend, p.x.dtype, p.out.dtype, Form::one_row, false, 0, size);
        // The modality of token 0: by sizes, the count of group starts at or below it.
        p.row_modality = p.ids_from_sizes.empty()
                             ? std::count_if(p.group_starts.begin(), p.group_starts.end(), [](std::int32_t s) { return s <= 0; })
                             : p.ids_from_sizes[0];
    }
    if (!paired_layout(p)) return;
    p.paired_words[0] = find_kernel(p.backend, p.x.dtype, p.out.dtype, Form::paired_words, false, 0, size);
    if (streaming) p.paired_words[1] = find_kernel(p.backend, p.x.dtype, p.out.dtype, Form::paired_words, true, 0, size);
}

bool policy_admits(const StreamingPolicy &policy, std::int64_t out_bytes, DType out_dtype, std::int64_t row_elements) {
    return policy.min_output_bytes > 0 && out_bytes >= policy.min_output_bytes &&
           static_cast<std::int64_t>(dtype_size(out_dtype)) >= policy.min_element_bytes && row_elements >= policy.min_row_elements;
}

bool policy_admits(const StreamingPolicy &policy, const CallPlan &p) {
    return policy_admits(policy, p.out_bytes, p.out.dtype, p.layout.extent[0]);
}

const KernelEntry &choose_kernel(const CallPlan &p, const void *x, const void *out) {
    const bool streaming =
        p.elements[1] != nullptr && policy_admits(p.streaming ? *p.streaming : streaming_policy(), p) &&
        aligned(out, static_cast<std::uintptr_t>(p.elements[1]->streaming_alignment));
    const int stores = streaming ? 1 : 0;
    if (!streaming && p.one_row != nullptr) return *p.one_row;
    const bool paired = p.paired_words[stores] != nullptr && aligned(x, 4) && aligned(out, 4);
    return paired ? *p.paired_words[stores] : *p.elements[stores];
}

CheckedView plan_inverse_rms_view(CallPlan &p, const NormConfig &config, const ConstTensorView &inv) {
    if (inv.memory != p.memory) throw Error(ErrorCode::device, "the inverse RMS must be in the same memory as the call's other views");
    CheckedView v;
    check_geometry(v, inv.dtype, inv.shape, inv.strides, "inverse RMS");
    plan_inverse_rms(p.layout, config, p.out, v);
    return v;
}

CallPlan plan_call(const NormState &norm, const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
                   const CallOptions &options) {
    // Halide's hooks go in before anything of Halide's runs (a device upload below, the kernel).
    install_halide_hooks();
    const NormConfig &config = norm.config;
    CallPlan p;
    p.norm = &norm;
    check_geometry(p.x, x.dtype, x.shape, x.strides, "input");
    check_geometry(p.out, out.dtype, out.shape, out.strides, "output");
    const DType out_dtype = output_dtype(config, x.dtype, options.out_dtype);
    if (p.out.dtype != out_dtype) {
        throw Error(ErrorCode::dtype, std::string("output dtype is ") + dtype_name(p.out.dtype) + " but the call produces " +
                                          dtype_name(out_dtype));
    }
    p.layout = plan_layout(config, p.x, p.out);
    check_no_self_overlap(p.out, "output");
    plan_backend(p, x, grouping, out, options.stream);
    if (options.inverse_rms) {
        const CheckedView &v = p.inverse_rms.emplace(plan_inverse_rms_view(p, config, *options.inverse_rms));
        check_no_self_overlap(v, "inverse RMS");
        // GPUs stage host views (strides >= 0 only) or use a cl_mem from its first byte.
        if (p.backend != Backend::cpu && has_negative_stride(v)) {
            throw Error(ErrorCode::stride, "GPU calls write the inverse RMS through strides >= 0, got " + shape_string(v.strides));
        }
        p.inverse_rms_data = options.inverse_rms->data;
    }
    plan_grouping(p, config, grouping);
    p.num_threads = options.num_threads;
    p.parallel_loop = options.parallel_loop;
    p.streaming = options.streaming;
    if (p.out.count == 0) return p;

    if (p.backend != Backend::cpu && p.memory == Memory::host && (has_negative_stride(p.x) || has_negative_stride(p.out))) {
        p.through_copies = true;
        CheckedView x_dense = p.x, out_dense = p.out;
        x_dense.strides = contiguous_dims(p.x.shape);
        out_dense.strides = contiguous_dims(p.out.shape);
        p.layout = plan_layout(config, x_dense, out_dense);
        // The inverse RMS (strides >= 0) is written in place.
        if (p.inverse_rms) plan_inverse_rms(p.layout, config, out_dense, *p.inverse_rms);
    }
    // One modality: every token reads the same scale, so the rows may regroup into more tokens.
    if (config.num_modality == 1) {
        fold_rows(p.layout, static_cast<std::int64_t>(dtype_size(p.x.dtype)), config.num_patterns > 1, knobs::cpu_chunk_bytes);
    }

    p.scale = norm.scale.data();
    static const std::int32_t kZeroId = 0;
    p.zero_id = &kZeroId;
    if (p.memory == Memory::device) {
        const auto device = norm.device_scales.get(norm.scale, p.backend, p.gpu_context, p.gpu_stream);
        p.scale = device.scale;
        p.zero_id = device.zero_id;
    }
    plan_variants(p);
    // The descriptors of each form the plan may run.
    const auto dims_of = [&p](Form form) -> KernelDims & { return p.dims[static_cast<std::size_t>(form)]; };
    set_kernel_dims(dims_of(p.inverse_rms ? Form::inverse_rms : Form::elements), p, p.inverse_rms ? Form::inverse_rms : Form::elements);
    if (p.paired_words[0] != nullptr) set_kernel_dims(dims_of(Form::paired_words), p, Form::paired_words);
    if (p.one_row != nullptr) set_kernel_dims(dims_of(Form::one_row), p, Form::one_row);
    return p;
}

void run_call(const CallPlan &p, const void *x, void *out, const std::int32_t *ids) { run_call(p, nullptr, x, out, ids); }

void run_call(const CallPlan &p, const KernelEntry *kernel, const void *x, void *out, const std::int32_t *ids) {
    const Region out_region = view_region(p, p.out, out, "output");
    const Region x_region = view_region(p, p.x, x, "input");
    check_disjoint(x_region, "input", out_region, "output", "in-place calls are not supported");
    if (p.inverse_rms) {
        const Region inv_region = view_region(p, *p.inverse_rms, p.inverse_rms_data, "inverse RMS");
        const char *why = "the inverse RMS is written while the other views are read or written";
        check_disjoint(inv_region, "inverse RMS", x_region, "input", why);
        check_disjoint(inv_region, "inverse RMS", out_region, "output", why);
        if (p.checks_ids) check_ids(p, ids, {{&out_region, "output"}, {&inv_region, "inverse RMS"}});
    } else if (p.checks_ids) {
        check_ids(p, ids, {{&out_region, "output"}});
    }
    if (p.out.count == 0) return;
    if (p.through_copies) {
        launch_through_copies(p, x, out, ids);
    } else {
        launch(p, kernel ? *kernel : choose_kernel(p, x, out), x, out, ids);
    }
}

}  // namespace magi2norm::detail
