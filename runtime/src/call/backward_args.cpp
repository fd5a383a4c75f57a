#include "backward_args.hpp"

#include <string>

#include "../devices/halide_calls.hpp"

namespace magi2norm::detail {

void set_views(const BackwardPlan &g, std::int64_t count, HalideBuffer<4> &xb, HalideBuffer<4> &dyb, HalideBuffer<4> &dxb) {
    const KernelLayout &l = g.p.layout;
    for (int axis = 0; axis < 4; ++axis) {
        const std::int64_t extent = axis == 3 ? count : l.extent[axis];
        // Rows are dense (unit stride along d, which a row of one element may not say).
        const auto stride = [&](std::int64_t s) { return axis == 0 ? 1 : s; };
        xb.set_dim(axis, extent, stride(l.x_stride[axis]));
        dyb.set_dim(axis, extent, stride(l.out_stride[axis]));
        dxb.set_dim(axis, axis == 1 ? extent / g.heads_per_dx_row : extent, stride(g.dx_stride[axis]));
    }
}


void set_inverse_rms(const BackwardPlan &g, std::int64_t first, std::int64_t count, InverseRms &inv) {
    const KernelLayout &l = g.p.layout;
    inv.given = g.inverse_rms.has_value();
    for (int axis = 1; axis < 4; ++axis) {
        const std::int64_t extent = axis == 3 ? count : l.extent[axis];
        inv.buffer.set_dim(axis - 1, inv.given ? extent : 1, inv.given ? l.inv_stride[axis] : 0);
    }
    const void *data = inv.given ? static_cast<const float *>(g.inverse_rms_data) + first * l.inv_stride[3] : &inv.unused;
    attach(inv.buffer, data);
}

void set_partials(const BackwardPlan &g, std::int64_t blocks, HalideBuffer<3> &b) {
    const std::int64_t dim = g.p.norm->config.dim;
    b.set_dim(0, dim, 1);
    b.set_dim(1, g.patterns, dim);
    b.set_dim(2, blocks, g.patterns * dim);
}


void throw_if_failed(int status, const KernelEntry &kernel) {
    if (status != 0) throw Error(ErrorCode::device, std::string(kernel.name) + " failed: " + take_halide_error());
}

}  // namespace magi2norm::detail
