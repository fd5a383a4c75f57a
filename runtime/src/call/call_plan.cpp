#include "call_plan.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "../devices/halide_calls.hpp"
#include "../devices/opencl_context.hpp"
#include "../variants/kernel_args.hpp"
#include "../views/overlap.hpp"
#include "call_checks.hpp"
#include "magi2norm_build_knobs.hpp"
#include "variant_choice.hpp"

namespace magi2norm::detail {

namespace {

// The descriptors' dimensions of the planned layout in `form`. For the paired-word form, x and
// out are uint32 words of two elements: half the row's extent, unit inner strides, and half of
// every other stride (even, except on axes of extent 1, where the stride is never applied).
// Written in place: a copy of a local made each 16-byte load of the copy wait on the four 4-byte
// stores of its fields.
void set_kernel_dims(KernelDims &d, const CallPlan &plan, Form form) {
    const KernelLayout &l = plan.layout;
    const bool paired = form == Form::paired_words;
    // Halves by a constant divisor: a divisor chosen at run time made six integer divisions.
    const auto words = [paired](std::int64_t elements) { return paired ? elements / 2 : elements; };
    const auto dim = [](std::int64_t extent, std::int64_t stride) {
        return halide_dimension_t(0, static_cast<std::int32_t>(extent), static_cast<std::int32_t>(stride));
    };
    for (int axis = 0; axis < 4; ++axis) {
        const bool inner = axis == 0 && paired;
        d.x[axis] = dim(inner ? l.extent[0] / 2 : l.extent[axis], inner ? 1 : words(l.x_stride[axis]));
        d.out[axis] = dim(inner ? l.extent[0] / 2 : l.extent[axis], inner ? 1 : words(l.out_stride[axis]));
    }
    const NormConfig &c = plan.norm->config;
    d.scale[0] = dim(c.dim, 1);
    d.scale[1] = dim(l.extent[1], l.scale_h_stride);
    // The one-row form reads its modality's block only.
    d.scale[2] = dim(form == Form::one_row ? 1 : c.num_modality, c.num_patterns * c.dim);
    // Without per-token ids the kernel reads a stride-0 view of one zero.
    const bool with_ids = plan.takes_ids || !plan.ids_from_sizes.empty();
    d.ids = dim(l.extent[3], with_ids ? 1 : 0);
    for (int axis = 1; axis < 4; ++axis) d.inverse_rms[axis - 1] = dim(l.extent[axis], l.inv_stride[axis]);
}

// `kernel` on pointers that passed their checks.
void launch(const CallPlan &p, const KernelEntry &kernel, const void *x, void *out, const std::int32_t *ids) {
    const bool paired = kernel.form == Form::paired_words;
    CallContext call{p.gpu_context, p.gpu_stream};
    if (p.backend == Backend::cpu) resolve_parallel_loop(call, p.parallel_loop, p.num_threads);
    const std::int32_t *kernel_ids = p.takes_ids ? ids : p.ids_from_sizes.empty() ? nullptr : p.ids_from_sizes.data();
    KernelArgs args(p.dims[static_cast<std::size_t>(kernel.form)], kernel.form, p.x.dtype, p.out.dtype, p.group_starts,
                    p.norm->config.eps, call);
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
    copy_to_contiguous(p.x, x, x_copy.data());
    launch(p, choose_kernel(p, x_copy.data(), out_copy.data()), x_copy.data(), out_copy.data(), ids);
    copy_from_contiguous(out_copy.data(), p.out, out);
}

}  // namespace

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
