// The argument pack of one call of a forward variant: halide_buffer_t descriptors of a planned
// layout (memory is attached by run_kernel, no data is copied) and the pointer array that every
// variant's _argv entry point takes.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "../devices/halide_calls.hpp"
#include "kernel_abi.h"
#include "kernels.hpp"

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

// The halide_dimension_t of x, out, scale, the inverse RMS and ids that one form's variants take
// for a planned layout, made once by the plan (call/call_plan.cpp, set_kernel_dims).
struct KernelDims {
    std::array<halide_dimension_t, 4> x, out;
    std::array<halide_dimension_t, 3> scale, inverse_rms;
    halide_dimension_t ids;
};

// One call's arguments: a form's descriptors with the call's memory attached by run_kernel, and
// the pointer array every variant's _argv entry point takes. The group starts and eps are read
// where their owner (the plan) keeps them, which outlives the call.
struct KernelArgs {
    static constexpr halide_type_t kWord{halide_type_uint, 32};
    using GroupStarts = std::array<std::int32_t, abi::kMaxGroups - 1>;

    HalideBuffer<4> x, out;
    HalideBuffer<3> scale, inverse_rms;
    HalideBuffer<1> ids;
    CallContext context;
    void *user_context = &context;
    const GroupStarts &group_starts;
    const float &eps;
    const bool writes_inverse_rms;
    std::array<void *, 1 + 3 + abi::kMaxGroups - 1 + 3> args;

    // x and out of dtypes `in` and `out_dtype` (32-bit words of two elements in the paired-word
    // form), laid out as `d`.
    KernelArgs(const KernelDims &d, Form form, DType in, DType out_dtype, const GroupStarts &starts, const float &epsilon,
               const CallContext &call)
        : x(form == Form::paired_words ? kWord : storage_type(in)),
          out(form == Form::paired_words ? kWord : storage_type(out_dtype)),
          scale(halide_type_t(halide_type_float, 32)), inverse_rms(halide_type_t(halide_type_float, 32)),
          ids(halide_type_t(halide_type_int, 32)), context(call), group_starts(starts), eps(epsilon),
          writes_inverse_rms(form == Form::inverse_rms) {
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
        for (const std::int32_t &start : group_starts) args[n++] = const_cast<std::int32_t *>(&start);
        args[n++] = const_cast<float *>(&eps);
        args[n++] = &out.buffer;
        if (writes_inverse_rms) args[n++] = &inverse_rms.buffer;
        return args.data();
    }
};

}  // namespace magi2norm::detail
