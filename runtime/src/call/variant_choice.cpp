#include "variant_choice.hpp"

#include <algorithm>
#include <string>

#include "../devices/halide_calls.hpp"
#include "backward_abi.h"
#include "backward_plan.hpp"

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
    // The AVX-512 BF16 element form serves BF16 -> BF16 rows too, faster than the paired-word form
    // (docs/benchmarks/native_bf16.md).
    const bool paired = p.paired_words[stores] != nullptr && p.elements[stores]->isa == Isa::any && aligned(x, 4) &&
                        aligned(out, 4);
    return paired ? *p.paired_words[stores] : *p.elements[stores];
}

// One of one dy row a dx row where the backend has one and the call allows it (every call but
// singleton-head broadcasting, `several_rows`), else one that adds rows; for CUDA the one for the
// highest capability the device has, as the forward's (find_kernel). dy is in x's dtype or FP32,
// the forward's outputs (SPEC.md).
const KernelEntry &find_backward(Backend backend, int device_capability, DType x, DType dy, DType dx, bool several_rows,
                                 CallSize size) {
    if (dy != x && dy != DType::f32) {
        const std::string allowed = x == DType::f32 ? "f32" : std::string(dtype_name(x)) + " or f32";
        throw Error(ErrorCode::dtype, std::string("dy dtype is ") + dtype_name(dy) + "; with a " + dtype_name(x) +
                                          " input it must be " + allowed + " (the forward's output dtypes)");
    }
    for (const Form form : {Form::backward_single, Form::backward}) {
        if (several_rows && form == Form::backward_single) continue;
        if (const KernelEntry *k = find_kernel(backend, x, dy, form, false, device_capability, size, dx)) return *k;
    }
    throw Error(ErrorCode::device, std::string("this library has no ") + backend_name(backend) + " backward");
}

const KernelEntry &choose_cpu_backward(const KernelEntry &ordinary, const KernelEntry *streaming, const KernelLayout &dx_layout,
                                       DType dx_dtype, std::int64_t dx_count, std::int64_t heads_per_dx_row, const void *dx) {
    const std::int64_t dim = dx_layout.extent[0];
    if (streaming == nullptr || heads_per_dx_row != 1 || dim % abi::kStreamingLanes != 0) return ordinary;
    const auto elem = static_cast<std::int64_t>(dtype_size(dx_dtype));
    const auto alignment = static_cast<std::uintptr_t>(streaming->streaming_alignment);
    const bool from_memory = policy_admits(streaming_policy(), dx_count * elem, dx_dtype, dim);
    return from_memory && streaming_layout(dx_layout, elem, streaming->streaming_alignment) && aligned(dx, alignment) ? *streaming
                                                                                                                   : ordinary;
}

BackwardVariants backward_variants(const BackwardPlan &g, int capability) {
    const auto bytes = [](const CheckedView &v) { return v.count * static_cast<std::int64_t>(dtype_size(v.dtype)); };
    const CallSize size{g.p.norm->config.dim, bytes(g.p.x) + bytes(g.p.out) + bytes(g.dx)};
    BackwardVariants v;
    v.kernel = &find_backward(g.p.backend, capability, g.p.x.dtype, g.p.out.dtype, g.dx.dtype, g.heads_per_dx_row > 1, size);
    v.streaming = find_kernel(g.p.backend, g.p.x.dtype, g.p.out.dtype, Form::backward_single, true, 0, size, g.dx.dtype);
    return v;
}


const KernelEntry &chosen_variant(const BackwardPlan &g, const BackwardVariants &v, const void *dx) {
    if (g.p.backend != Backend::cpu) return *v.kernel;
    KernelLayout dx_layout = g.p.layout;
    dx_layout.out_stride = g.dx_stride;
    return choose_cpu_backward(*v.kernel, v.streaming, dx_layout, g.dx.dtype, g.dx.count, g.heads_per_dx_row, dx);
}

}  // namespace magi2norm::detail
