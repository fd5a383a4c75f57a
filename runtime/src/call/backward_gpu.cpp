#include "backward_gpu.hpp"

#include <algorithm>

#include "../devices/staging.hpp"
#include "backward_args.hpp"
#include "backward_partials.hpp"

namespace magi2norm::detail {

GpuTables gpu_tables(const BackwardPlan &g, std::vector<std::int64_t> sizes, const std::int32_t *ids) {
    const auto tokens = static_cast<std::size_t>(g.p.layout.extent[3]);
    if (ids) {
        std::fill(sizes.begin(), sizes.end(), 0);
        for (std::size_t i = 0; i < tokens; ++i) ++sizes[static_cast<std::size_t>(ids[i])];
    }
    GpuTables t;
    t.modality.resize(tokens);
    std::vector<std::int64_t> next(sizes.size() + 1, 0);
    for (std::size_t m = 0; m < sizes.size(); ++m) next[m + 1] = next[m] + sizes[m];
    for (std::size_t m = 0, i = 0; m < sizes.size(); ++m) {
        for (std::int64_t k = 0; k < sizes[m]; ++k, ++i) t.modality[i] = static_cast<std::int32_t>(m);
    }
    if (ids) std::copy(ids, ids + tokens, t.modality.begin());
    t.order.resize(tokens);
    std::vector<std::int64_t> place(next.begin(), next.end() - 1);
    for (std::size_t i = 0; i < tokens; ++i) t.order[static_cast<std::size_t>(place[t.modality[i]]++)] = static_cast<std::int32_t>(i);
    t.modality_blocks.push_back(0);
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        for (std::int64_t first = next[m]; first < next[m + 1]; first += g.block_tokens) {
            t.block_first.push_back(static_cast<std::int32_t>(first));
        }
        t.modality_blocks.push_back(static_cast<std::int64_t>(t.block_first.size()));
    }
    t.block_first.push_back(static_cast<std::int32_t>(tokens));
    return t;
}

std::vector<float> run_gpu(const BackwardPlan &g, const KernelEntry &kernel, CallContext &call, const void *x, const void *dy,
                           void *dx, const GpuTables &t) {
    const NormState &norm = *g.p.norm;
    const NormConfig &c = norm.config;
    const std::int64_t row = g.patterns * c.dim;
    std::vector<float> dscale(static_cast<std::size_t>(c.num_modality * row), 0.0f);
    const auto blocks = static_cast<std::int64_t>(t.block_first.size()) - 1;
    if (g.p.out.count == 0 || blocks == 0) return dscale;
    HalideBuffer<4> xb(storage_type(g.p.x.dtype)), dyb(storage_type(g.p.out.dtype)), dxb(storage_type(g.dx.dtype));
    HalideBuffer<3> scale(halide_type_t(halide_type_float, 32)), partials(halide_type_t(halide_type_float, 32));
    const halide_type_t int32(halide_type_int, 32);
    HalideBuffer<1> modality(int32), order(int32), block_first(int32);
    set_views(g, g.p.layout.extent[3], xb, dyb, dxb);
    scale.set_dim(0, c.dim, 1);
    scale.set_dim(1, g.p.layout.extent[1], c.num_patterns > 1 ? c.dim : 0);
    scale.set_dim(2, c.num_modality, row);
    modality.set_dim(0, static_cast<std::int64_t>(t.modality.size()), 1);
    order.set_dim(0, static_cast<std::int64_t>(t.order.size()), 1);
    block_first.set_dim(0, blocks + 1, 1);
    std::vector<float> sums(static_cast<std::size_t>(blocks * row));
    set_partials(g, blocks, partials);

    Staging staging(kernel.backend, g.p.memory, &call);
    staging.input(xb.buffer, x);
    staging.input(dyb.buffer, dy);
    staging.output(dxb.buffer, dx);
    if (g.p.memory == Memory::device) {
        staging.input(scale.buffer, norm.device_scales.get(norm.scale, g.p.backend, g.p.gpu_context, g.p.gpu_stream).scale);
    } else {
        staging.host_input(scale.buffer, norm.scale.data());
    }
    staging.host_input(modality.buffer, t.modality.data());
    staging.host_input(order.buffer, t.order.data());
    staging.host_input(block_first.buffer, t.block_first.data());
    staging.host_output(partials.buffer, sums.data());
    InverseRms inv;
    set_inverse_rms(g, 0, g.p.layout.extent[3], inv);
    if (inv.given) {
        staging.input(inv.buffer.buffer, inv.buffer.buffer.host);
    } else {
        staging.host_input(inv.buffer.buffer, &inv.unused);
    }

    void *user_context = &call;
    std::int32_t k = static_cast<std::int32_t>(g.heads_per_dx_row), hp = static_cast<std::int32_t>(g.heads_per_pattern);
    std::int32_t block = static_cast<std::int32_t>(g.block_tokens);
    float eps = c.eps;
    void *args[] = {&user_context, &xb.buffer, &dyb.buffer, &inv.buffer.buffer, &scale.buffer, &modality.buffer, &order.buffer,
                    &block_first.buffer, &k, &hp, &block, &eps, &inv.given, &partials.buffer, &dxb.buffer};
    int status = kernel.fn(args);
    if (status == 0) status = staging.finish(dxb.buffer);
    if (status == 0) status = staging.finish(partials.buffer);
    throw_if_failed(status, kernel);
    std::vector<double> sum(static_cast<std::size_t>(row));
    for (std::size_t m = 0; m + 1 < t.modality_blocks.size(); ++m) {
        const std::int64_t first = t.modality_blocks[m], count = t.modality_blocks[m + 1] - first;
        if (count > 0) add_partials(sums.data() + first * row, count, row, sum.data(), dscale.data() + m * row);
    }
    return dscale;
}

}  // namespace magi2norm::detail
