// The argument pack of one call of a variant: halide_buffer_t descriptors laid over the call's
// memory (no copies) and the pointer array that every variant's _argv entry point takes.
#pragma once

#include <array>
#include <cstdint>

#include "halide_calls.hpp"
#include "kernels.hpp"

namespace magi2norm::detail {

// Every variant's _argv entry point: pointers to (user_context, x, scale, token_modality,
// group_start_1..15, eps, out), in that order.
using KernelFn = int (*)(void **args);

inline halide_type_t storage_type(DType dtype) {
    return dtype == DType::f32 ? halide_type_t(halide_type_float, 32) : halide_type_t(halide_type_uint, 16);
}

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
    void set_dim(int i, std::int64_t min, std::int64_t extent, std::int64_t stride) {
        dims[i] = halide_dimension_t(static_cast<std::int32_t>(min), static_cast<std::int32_t>(extent),
                                     static_cast<std::int32_t>(stride));
    }
};

struct KernelArgs {
    static constexpr halide_type_t kWord{halide_type_uint, 32};

    HalideBuffer<4> x, out;
    HalideBuffer<3> scale;
    HalideBuffer<1> ids;  // without per-token ids: a stride-0 view of one zero
    CallContext context;
    void *user_context = &context;
    std::array<std::int32_t, kMaxGroups - 1> starts;
    float eps;
    std::array<void *, 1 + 3 + kMaxGroups - 1 + 2> args{};

    // Descriptors of the whole call; the caller attaches memory (host pointers or device). For
    // a paired-word variant (takes_paired_words), x and out are uint32 words of two elements:
    // half the row's extent, unit inner strides, and half of every other stride (even, except on
    // axes of extent 1, where the stride is never applied).
    KernelArgs(const KernelCall &c, bool paired_words)
        : x(paired_words ? kWord : storage_type(c.in_dtype)), out(paired_words ? kWord : storage_type(c.out_dtype)),
          scale(halide_type_t(halide_type_float, 32)), ids(halide_type_t(halide_type_int, 32)),
          context{c.gpu_context, c.gpu_stream}, starts(c.group_starts), eps(c.eps) {
        const KernelLayout &l = c.layout;
        const std::int64_t per = paired_words ? 2 : 1;
        for (int axis = 0; axis < 4; ++axis) {
            if (axis == 0 && paired_words) {
                x.set_dim(0, 0, l.extent[0] / 2, 1);
                out.set_dim(0, 0, l.extent[0] / 2, 1);
                continue;
            }
            x.set_dim(axis, 0, l.extent[axis], l.x_stride[axis] / per);
            out.set_dim(axis, 0, l.extent[axis], l.out_stride[axis] / per);
        }
        scale.set_dim(0, 0, c.dim, 1);
        scale.set_dim(1, 0, l.extent[1], l.scale_h_stride);
        scale.set_dim(2, 0, c.num_modality, c.num_patterns * c.dim);
        ids.set_dim(0, 0, l.extent[3], c.token_ids ? 1 : 0);
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
