// The argument pack of one call of a variant: halide_buffer_t descriptors of the planned layout
// (memory is attached by run_kernel, no data is copied) and the pointer array that every
// variant's _argv entry point takes.
#pragma once

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

struct KernelArgs {
    static constexpr halide_type_t kWord{halide_type_uint, 32};

    HalideBuffer<4> x, out;
    HalideBuffer<3> scale;
    HalideBuffer<1> ids;  // without per-token ids: a stride-0 view of one zero
    CallContext context;
    void *user_context = &context;
    std::array<std::int32_t, abi::kMaxGroups - 1> starts;
    float eps;
    std::array<void *, 1 + 3 + abi::kMaxGroups - 1 + 2> args{};

    // Descriptors of the planned layout in `form`; run_kernel attaches the memory. For the
    // paired-word form, x and out are uint32 words of two elements: half the row's extent, unit
    // inner strides, and half of every other stride (even, except on axes of extent 1, where the
    // stride is never applied).
    KernelArgs(const CallPlan &plan, Form form, bool with_ids, const CallContext &call)
        : x(form == Form::paired_words ? kWord : storage_type(plan.x.dtype)),
          out(form == Form::paired_words ? kWord : storage_type(plan.out.dtype)),
          scale(halide_type_t(halide_type_float, 32)), ids(halide_type_t(halide_type_int, 32)), context(call),
          starts(plan.group_starts), eps(plan.norm->config.eps) {
        const KernelLayout &l = plan.layout;
        const bool paired = form == Form::paired_words;
        // Halves by a constant divisor: a divisor chosen at run time made six integer divisions
        // of every call.
        const auto words = [paired](std::int64_t elements) { return paired ? elements / 2 : elements; };
        for (int axis = 0; axis < 4; ++axis) {
            const bool inner = axis == 0 && paired;
            x.set_dim(axis, inner ? l.extent[0] / 2 : l.extent[axis], inner ? 1 : words(l.x_stride[axis]));
            out.set_dim(axis, inner ? l.extent[0] / 2 : l.extent[axis], inner ? 1 : words(l.out_stride[axis]));
        }
        const NormConfig &c = plan.norm->config;
        scale.set_dim(0, c.dim, 1);
        scale.set_dim(1, l.extent[1], l.scale_h_stride);
        scale.set_dim(2, c.num_modality, c.num_patterns * c.dim);
        ids.set_dim(0, l.extent[3], with_ids ? 1 : 0);
    }
    KernelArgs(const KernelArgs &) = delete;
    KernelArgs &operator=(const KernelArgs &) = delete;

    void **pack() {
        std::size_t n = 0;
        args[n++] = &user_context;
        args[n++] = &x.buffer;
        args[n++] = &scale.buffer;
        args[n++] = &ids.buffer;
        for (std::int32_t &start : starts) args[n++] = &start;
        args[n++] = &eps;
        args[n++] = &out.buffer;
        return args.data();
    }
};

}  // namespace magi2norm::detail
