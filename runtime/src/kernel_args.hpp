// The argument pack of one call of a variant: halide_buffer_t descriptors of the planned layout
// (memory is attached by run_kernel, no data is copied) and the pointer array that every
// variant's _argv entry point takes.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "call_plan.hpp"
#include "halide_calls.hpp"

namespace magi2norm::detail {

// A halide_buffer_t with its dimensions stored alongside; `host` is set by the caller.
template <int N>
struct HalideBuffer {
    halide_buffer_t buffer{};
    halide_dimension_t dims[N]{};

    explicit HalideBuffer(halide_type_t type) {
        buffer.type = type;
        buffer.dimensions = N;
        buffer.dim = dims;
    }
    HalideBuffer(const HalideBuffer &) = delete;
    HalideBuffer &operator=(const HalideBuffer &) = delete;
    void set_dim(int i, std::int64_t extent, std::int64_t stride) {
        dims[i] = halide_dimension_t(0, static_cast<std::int32_t>(extent), static_cast<std::int32_t>(stride));
    }
};

inline halide_type_t storage_type(DType dtype) {
    return dtype == DType::f32 ? halide_type_t(halide_type_float, 32) : halide_type_t(halide_type_uint, 16);
}

// The descriptors' dimensions of the planned layout in `form`, made once by the plan. For the
// paired-word form, x and out are uint32 words of two elements: half the row's extent, unit
// inner strides, and half of every other stride (even, except on axes of extent 1, where the
// stride is never applied). Written in place: a copy of a local made each 16-byte load of the
// copy wait on the four 4-byte stores of its fields.
inline void set_kernel_dims(KernelDims &d, const CallPlan &plan, Form form) {
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

// One call's arguments: the plan's descriptors with the call's memory attached by run_kernel,
// and the pointer array every variant's _argv entry point takes (the group starts and eps are
// read where the plan keeps them).
struct KernelArgs {
    static constexpr halide_type_t kWord{halide_type_uint, 32};

    HalideBuffer<4> x, out;
    HalideBuffer<3> scale, inverse_rms;
    HalideBuffer<1> ids;
    CallContext context;
    void *user_context = &context;
    const CallPlan &plan;
    const bool writes_inverse_rms;
    std::array<void *, 1 + 3 + abi::kMaxGroups - 1 + 3> args;

    KernelArgs(const CallPlan &p, Form form, const CallContext &call)
        : x(form == Form::paired_words ? kWord : storage_type(p.x.dtype)),
          out(form == Form::paired_words ? kWord : storage_type(p.out.dtype)),
          scale(halide_type_t(halide_type_float, 32)), inverse_rms(halide_type_t(halide_type_float, 32)),
          ids(halide_type_t(halide_type_int, 32)), context(call), plan(p), writes_inverse_rms(form == Form::inverse_rms) {
        const KernelDims &d = p.dims[static_cast<std::size_t>(form)];
        std::copy(d.x.begin(), d.x.end(), x.dims);
        std::copy(d.out.begin(), d.out.end(), out.dims);
        std::copy(d.scale.begin(), d.scale.end(), scale.dims);
        std::copy(d.inverse_rms.begin(), d.inverse_rms.end(), inverse_rms.dims);
        ids.dims[0] = d.ids;
    }
    KernelArgs(const KernelArgs &) = delete;
    KernelArgs &operator=(const KernelArgs &) = delete;

    void **pack() {
        std::size_t n = 0;
        args[n++] = &user_context;
        args[n++] = &x.buffer;
        args[n++] = &scale.buffer;
        args[n++] = &ids.buffer;
        // Halide reads scalar arguments through these pointers and never writes them.
        for (const std::int32_t &start : plan.group_starts) args[n++] = const_cast<std::int32_t *>(&start);
        args[n++] = const_cast<float *>(&plan.norm->config.eps);
        args[n++] = &out.buffer;
        if (writes_inverse_rms) args[n++] = &inverse_rms.buffer;
        return args.data();
    }
};

}  // namespace magi2norm::detail
