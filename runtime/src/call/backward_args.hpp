// The backward kernels' arguments, CPU and GPU alike: x, dy and dx on the kernel axes, the
// forward's inverse RMS (or a stand-in the kernels do not read) and the partials' descriptor.
#pragma once

#include <cstdint>

#include "../variants/kernel_args.hpp"
#include "../variants/kernels.hpp"
#include "backward_plan.hpp"

namespace magi2norm::detail {

// A descriptor's host pointer.
template <int N>
void attach(HalideBuffer<N> &b, const void *data) {
    b.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(data));
}

// x, dy and dx of `count` tokens as the kernel takes them, from the plan's layout.
void set_views(const BackwardPlan &g, std::int64_t count, HalideBuffer<4> &xb, HalideBuffer<4> &dyb, HalideBuffer<4> &dxb);

// The inverse RMS of `count` tokens as the kernels take it, (h, a, t) of the plan's layout; without
// one, a view of one float at stride 0 that the kernels do not use (`given` says which).
struct InverseRms {
    HalideBuffer<3> buffer{halide_type_t(halide_type_float, 32)};
    bool given = false;
    float unused = 0.0f;
};
void set_inverse_rms(const BackwardPlan &g, std::int64_t first, std::int64_t count, InverseRms &inv);

// The partials' descriptor: [blocks][P][D] FP32.
void set_partials(const BackwardPlan &g, std::int64_t blocks, HalideBuffer<3> &b);

// Error(device) naming the variant and Halide's message where `status` is not 0.
void throw_if_failed(int status, const KernelEntry &kernel);

}  // namespace magi2norm::detail
