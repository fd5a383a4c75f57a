#include "kernels.hpp"

#include <string>

#include "HalideRuntime.h"
#include "magi2norm_kernel_headers.h"

namespace magi2norm::detail {

namespace {

// Every variant's _argv entry point: pointers to (x, scale, token_modality, group_start_1..15,
// eps, out), in that order.
using KernelFn = int (*)(void **args);

enum class Family { cpu };

struct KernelEntry {
    Family family;
    DType in, out;
    KernelFn fn;
};

#define MAGI2NORM_KERNEL(family, in, out) {Family::family, DType::in, DType::out, magi2_norm_##family##_##in##_##out##_argv},
constexpr KernelEntry kKernels[] = {
#include "magi2norm_kernel_list.inc"
};
#undef MAGI2NORM_KERNEL

KernelFn find_kernel(Family family, DType in, DType out) {
    for (const KernelEntry &k : kKernels) {
        if (k.family == family && k.in == in && k.out == out) return k.fn;
    }
    throw Error(ErrorCode::dtype, std::string("no kernel for ") + dtype_name(in) + " -> " + dtype_name(out));
}

halide_type_t storage_type(DType dtype) {
    return dtype == DType::f32 ? halide_type_t(halide_type_float, 32) : halide_type_t(halide_type_uint, 16);
}

template <int N>
struct HalideBuffer {
    halide_buffer_t buffer{};
    halide_dimension_t dims[N]{};

    HalideBuffer(const void *host, halide_type_t type) {
        buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(host));
        buffer.type = type;
        buffer.dimensions = N;
        buffer.dim = dims;
    }
    void set_dim(int i, std::int64_t extent, std::int64_t stride) {
        dims[i] = halide_dimension_t(0, static_cast<std::int32_t>(extent), static_cast<std::int32_t>(stride));
    }
};

// Halide reports failures through this handler; the message goes into the exception.
thread_local std::string last_halide_error;
void capture_halide_error(void *, const char *message) { last_halide_error = message; }

}  // namespace

void run_cpu_kernel(const KernelCall &c) {
    const KernelFn fn = find_kernel(Family::cpu, c.in_dtype, c.out_dtype);
    const KernelLayout &l = c.layout;

    HalideBuffer<4> x(c.x, storage_type(c.in_dtype)), out(c.out, storage_type(c.out_dtype));
    for (int axis = 0; axis < 4; ++axis) {
        x.set_dim(axis, l.extent[axis], l.x_stride[axis]);
        out.set_dim(axis, l.extent[axis], l.out_stride[axis]);
    }
    HalideBuffer<3> scale(c.scale, halide_type_t(halide_type_float, 32));
    scale.set_dim(0, c.dim, 1);
    scale.set_dim(1, l.extent[1], l.scale_h_stride);
    scale.set_dim(2, c.num_modality, c.num_patterns * c.dim);

    // Without per-token ids every token reads id 0 through a stride-0 view of one zero.
    static const std::int32_t kZero = 0;
    HalideBuffer<1> ids(c.token_ids ? c.token_ids : &kZero, halide_type_t(halide_type_int, 32));
    ids.set_dim(0, l.extent[3], c.token_ids ? 1 : 0);

    static const bool handler_installed = (halide_set_error_handler(capture_halide_error), true);
    (void)handler_installed;
    std::array<void *, 3 + kMaxGroups - 1 + 2> args{};
    std::size_t n = 0;
    args[n++] = &x.buffer;
    args[n++] = &scale.buffer;
    args[n++] = &ids.buffer;
    std::array<std::int32_t, kMaxGroups - 1> starts = c.group_starts;
    for (std::int32_t &start : starts) args[n++] = &start;
    float eps = c.eps;
    args[n++] = &eps;
    args[n++] = &out.buffer;
    const int status = fn(args.data());
    if (status != 0) {
        throw std::runtime_error("magi2norm: kernel failed (Halide status " + std::to_string(status) +
                                 "): " + last_halide_error);
    }
}

}  // namespace magi2norm::detail
