#include "backward.hpp"

#include <optional>
#include <string>
#include <vector>

#include "../devices/halide_calls.hpp"
#include "../devices/staging.hpp"
#include "../views/views.hpp"
#include "backward_args.hpp"
#include "backward_gpu.hpp"
#include "backward_plan.hpp"
#include "call_checks.hpp"
#include "variant_choice.hpp"

namespace magi2norm::detail {

namespace {

// The views of one modality's tokens [first, first + count) and its [P, D] scale.
struct Segment {
    std::int64_t first = 0, count = 0;
    const float *scale = nullptr;
    float *partials = nullptr;  // [blocks][P][D]
    std::int64_t blocks = 0;
};

// The CPU variant over one modality's tokens.
void run_segment(const BackwardPlan &g, const KernelEntry &kernel, CallContext &call, const void *x, const void *dy, void *dx,
                 const Segment &s) {
    const KernelLayout &l = g.p.layout;
    const NormConfig &c = g.p.norm->config;
    HalideBuffer<4> xb(storage_type(g.p.x.dtype)), dyb(storage_type(g.p.out.dtype)), dxb(storage_type(g.dx.dtype));
    HalideBuffer<2> scale(halide_type_t(halide_type_float, 32));
    HalideBuffer<3> partials(halide_type_t(halide_type_float, 32));
    set_views(g, s.count, xb, dyb, dxb);
    const auto at = [&](const void *base, std::int64_t stride, DType dtype) {
        return static_cast<const char *>(base) + s.first * stride * static_cast<std::int64_t>(dtype_size(dtype));
    };
    attach(xb, at(x, l.x_stride[3], g.p.x.dtype));
    attach(dyb, at(dy, l.out_stride[3], g.p.out.dtype));
    attach(dxb, at(dx, g.dx_stride[3], g.dx.dtype));
    scale.set_dim(0, c.dim, 1);
    scale.set_dim(1, l.extent[1], c.num_patterns > 1 ? c.dim : 0);
    attach(scale, s.scale);
    set_partials(g, s.blocks, partials);
    attach(partials, s.partials);
    InverseRms inv;
    set_inverse_rms(g, s.first, s.count, inv);

    void *user_context = &call;
    std::int32_t k = static_cast<std::int32_t>(g.heads_per_dx_row), hp = static_cast<std::int32_t>(g.heads_per_pattern);
    std::int32_t block = static_cast<std::int32_t>(g.block_tokens);
    float eps = c.eps;
    void *args[] = {&user_context, &xb.buffer, &dyb.buffer, &inv.buffer.buffer, &scale.buffer, &k, &hp, &block, &eps, &inv.given,
                    &dxb.buffer, &partials.buffer};
    throw_if_failed(kernel.fn(args), kernel);
}

// dscale[m][p][d]: each modality's partials added block by block, in FP64, rounded once.
std::vector<float> run_kernels(const BackwardPlan &g, const KernelEntry &kernel, CallContext &call, const void *x, const void *dy,
                               void *dx, const std::vector<std::int64_t> &sizes) {
    const NormConfig &c = g.p.norm->config;
    const std::int64_t row = g.patterns * c.dim;
    std::vector<float> dscale(static_cast<std::size_t>(c.num_modality * row), 0.0f);
    PartialsStorage storage;
    std::vector<double> sum(static_cast<std::size_t>(row));
    std::int64_t first = 0;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        Segment s;
        s.first = first;
        s.count = sizes[m];
        first += sizes[m];
        if (s.count == 0 || g.p.out.count == 0) continue;
        s.blocks = (s.count + g.block_tokens - 1) / g.block_tokens;
        s.partials = storage.reserve(static_cast<std::size_t>(s.blocks * row));
        s.scale = g.p.norm->scale.data() + static_cast<std::int64_t>(m) * row;
        run_segment(g, kernel, call, x, dy, dx, s);
        add_partials(s.partials, s.blocks, row, sum.data(), dscale.data() + m * row);
    }
    return dscale;
}

}  // namespace

const KernelEntry &backward_kernel(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy,
                                   const Grouping &grouping, const TensorView &dx, const TensorView &dweight,
                                   const BackwardOptions &options) {
    const BackwardPlan g = plan_backward(norm, x, dy, grouping, dx, dweight, options);
    const int capability = g.p.backend == Backend::cuda ? cuda_compute_capability(g.p.gpu_context) : 0;
    return chosen_variant(g, backward_variants(g, capability), dx.data);
}

void run_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                  const TensorView &dx, const TensorView &dweight, const BackwardOptions &options) {
    run_backward(norm, x, dy, grouping, dx, dweight, options, nullptr);
}

void run_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                  const TensorView &dx, const TensorView &dweight, const BackwardOptions &options, const KernelEntry *instead) {
    install_halide_hooks();
    BackwardPlan g = plan_backward(norm, x, dy, grouping, dx, dweight, options);
    check_backward_pointers(g, x.data, dy.data, dx.data, dweight.data, grouping.token_ids());
    const int capability = g.p.backend == Backend::cuda ? cuda_compute_capability(g.p.gpu_context) : 0;
    const BackwardVariants variants = backward_variants(g, capability);
    CallContext call{g.p.gpu_context, g.p.gpu_stream};
    const bool gpu = g.p.backend != Backend::cpu;
    if (!gpu) resolve_parallel_loop(call, g.p.parallel_loop, g.p.num_threads);

    // GPUs take the ids as a table, read on the host (device ids copied there and checked).
    const std::int32_t *ids = grouping.token_ids();
    std::vector<std::int32_t> host_ids;
    if (gpu && g.p.takes_ids && g.p.memory == Memory::device && g.p.tokens > 0) {
        host_ids.resize(static_cast<std::size_t>(g.p.tokens));
        copy_to_host(g.p.backend, &call, ids, host_ids.data(), host_ids.size() * sizeof(std::int32_t));
        check_id_values(host_ids.data(), g.p.tokens, norm.config.num_modality);
        ids = host_ids.data();
    }
    const auto run = [&](const BackwardPlan &geometry, const void *xs, const void *dys, void *dxs, const std::vector<std::int64_t> &sizes) {
        const KernelEntry &chosen = instead ? *instead : chosen_variant(geometry, variants, dxs);
        std::vector<float> sums = gpu ? run_gpu(geometry, chosen, call, xs, dys, dxs, gpu_tables(geometry, sizes, geometry.p.takes_ids ? ids : nullptr))
                                      : run_kernels(geometry, chosen, call, xs, dys, dxs, sizes);
        set_last_variant(chosen.name);
        return sums;
    };

    std::vector<float> dscale;
    // The kernels read dense rows; a GPU's staging copies host views of strides >= 0 only
    // (device views are dense and used in place: check_device_views).
    const bool dense = (g.p.layout.extent[0] == 1 ||
                        (g.p.layout.x_stride[0] == 1 && g.p.layout.out_stride[0] == 1 && g.dx_stride[0] == 1)) &&
                       (g.p.memory == Memory::device || !gpu ||
                        (!has_negative_stride(g.p.x) && !has_negative_stride(g.p.out) && !has_negative_stride(g.dx) &&
                         !(g.inverse_rms && has_negative_stride(*g.inverse_rms))));
    // CPUs run a call by ids on tokens permuted into modality order.
    const bool permuted = !gpu && g.p.takes_ids;
    if (g.p.out.count > 0 && (permuted || !dense)) {
        // Through contiguous copies of x and dy, dx copied back: by ids permuted into modality
        // order (the dispatcher's stable order), so each modality's blocks hold the same tokens,
        // in the same order, as the call by sizes on dispatched tensors; other views in their
        // own order.
        const auto dense_copy = [](const CheckedView &v, std::vector<unsigned char> &memory) {
            memory.resize(static_cast<std::size_t>(v.count) * dtype_size(v.dtype));
            return TensorView(memory.data(), v.dtype, v.shape.to_vector());
        };
        std::vector<unsigned char> x_memory, dy_memory, dx_memory, inv_memory;
        const TensorView x_copy = dense_copy(g.p.x, x_memory), dy_copy = dense_copy(g.p.out, dy_memory);
        const TensorView dx_copy = dense_copy(g.dx, dx_memory);
        BackwardOptions copy_options = options;
        if (g.inverse_rms) copy_options.inverse_rms = dense_copy(*g.inverse_rms, inv_memory);
        std::optional<ModalityDispatcher> dispatcher;
        if (permuted) {
            dispatcher.emplace(ids, g.p.tokens, norm.config.num_modality);
            dispatcher->dispatch(x, x_copy);
            dispatcher->dispatch(dy, dy_copy);
            if (g.inverse_rms) dispatcher->dispatch(*options.inverse_rms, TensorView(inv_memory.data(), DType::f32, g.inverse_rms->shape.to_vector()));
        } else {
            copy_to_contiguous(g.p.x, x.data, x_copy.data);
            copy_to_contiguous(g.p.out, dy.data, dy_copy.data);
            if (g.inverse_rms) copy_to_contiguous(*g.inverse_rms, g.inverse_rms_data, inv_memory.data());
        }
        const std::vector<std::int64_t> sizes = dispatcher ? dispatcher->group_sizes() : segment_sizes(g, grouping);
        const BackwardPlan copies = plan_backward(norm, x_copy, dy_copy, dispatcher ? Grouping::sizes(sizes) : grouping, dx_copy,
                                              dweight, copy_options);
        dscale = run(copies, x_copy.data, dy_copy.data, dx_copy.data, sizes);
        if (dispatcher) {
            dispatcher->undispatch(dx_copy, dx);
        } else {
            copy_from_contiguous(dx_copy.data, g.dx, dx.data);
        }
    } else {
        dscale = run(g, x.data, dy.data, dx.data, segment_sizes(g, grouping));
    }
    write_dweight(g, call, dscale, dweight.data, options.accumulate_dweight);
}

}  // namespace magi2norm::detail
