#include "backward_plan.hpp"

#include <string>

#include "../views/layout.hpp"
#include "../views/overlap.hpp"
#include "backward_partials.hpp"
#include "call_checks.hpp"
#include "variant_choice.hpp"

namespace magi2norm::detail {

namespace {

// The extent of x's pattern axis (SPEC.md's broadcasting, right-aligned): 1 where it broadcasts.
std::int64_t input_pattern_extent(const CheckedView &x, std::size_t out_rank) {
    const std::size_t axis = out_rank - 2, shift = out_rank - x.shape.size();
    return axis < shift ? 1 : x.shape[axis - shift];
}

// Device views are used in place: rows dense (unit stride along d), dy's strides >= 0 in an
// OpenCL buffer as x's and dx's, and dweight contiguous in its row-major order.
void check_device_views(const CallPlan &p, const CheckedView &dweight, const KernelLayout &dx_layout) {
    if (p.cl_buffers && has_negative_stride(p.out)) {
        throw Error(ErrorCode::stride, "dy " + shape_string(p.out.shape) +
                                           " is an OpenCL buffer, which a view starts at the first byte of, so its strides must be >= 0");
    }
    const KernelLayout &l = p.layout;
    if (l.extent[0] > 1 && (l.x_stride[0] != 1 || l.out_stride[0] != 1 || dx_layout.x_stride[0] != 1)) {
        throw Error(ErrorCode::stride, "device-memory views of the backward need unit stride along the normalized axis (input, dy, dx)");
    }
    const Dims dense = contiguous_dims(dweight.shape);
    for (std::size_t i = 0; i < dense.size(); ++i) {
        if (dweight.shape[i] > 1 && dweight.strides[i] != dense[i]) {
            throw Error(ErrorCode::stride, "dweight " + shape_string(dweight.shape) + " in device memory must be contiguous (row-major)");
        }
    }
}

}  // namespace

BackwardPlan plan_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                           const TensorView &dx, const TensorView &dweight, const BackwardOptions &options) {
    const NormConfig &config = norm.config;
    BackwardPlan g;
    CallPlan &p = g.p;
    p.norm = &norm;
    check_geometry(p.x, x.dtype, x.shape, x.strides, "input");
    check_geometry(p.out, dy.dtype, dy.shape, dy.strides, "dy");
    check_geometry(g.dx, dx.dtype, dx.shape, dx.strides, "dx");
    check_geometry(g.dweight, dweight.dtype, dweight.shape, dweight.strides, "dweight");
    const Dims expected = output_shape(config, p.x.shape);
    if (p.out.shape != expected) {
        throw Error(ErrorCode::shape, "dy shape is " + shape_string(p.out.shape) + " but input " + shape_string(p.x.shape) +
                                          " gives the output shape " + shape_string(expected));
    }
    if (g.dx.shape != p.x.shape) {
        throw Error(ErrorCode::shape, "dx shape is " + shape_string(g.dx.shape) + " but the input's is " + shape_string(p.x.shape));
    }
    const DType dx_dtype = output_dtype(config, x.dtype, options.dx_dtype.value_or(x.dtype));
    if (g.dx.dtype != dx_dtype) {
        throw Error(ErrorCode::dtype, std::string("dx dtype is ") + dtype_name(g.dx.dtype) + " but the call produces " +
                                          dtype_name(dx_dtype));
    }
    const std::int64_t weight_elements = config.num_modality * config.num_patterns * config.dim;
    if (g.dweight.count != weight_elements) {
        throw Error(ErrorCode::weight, "dweight has " + std::to_string(g.dweight.count) +
                                           " elements but num_modality * num_patterns * dim = " + std::to_string(weight_elements));
    }
    p.backend = options.stream.backend ? *options.stream.backend : default_backend();
    find_backward(p.backend, 0, p.x.dtype, p.out.dtype, g.dx.dtype, false, CallSize{});
    p.layout = plan_layout(config, p.x, p.out);
    const KernelLayout dx_layout = plan_layout(config, g.dx, p.out);
    check_no_self_overlap(g.dx, "dx");
    check_no_self_overlap(g.dweight, "dweight");

    // Host views on any backend (a GPU's staged through the device), device views on a GPU's.
    plan_backend(p, x, grouping, dx, options.stream);
    if (dy.memory != p.memory || dweight.memory != p.memory) {
        throw Error(ErrorCode::device, "input, dy, dx, dweight and modality ids must all be in host memory or all in device memory");
    }
    if (p.memory == Memory::device) check_device_views(p, g.dweight, dx_layout);
    if (options.inverse_rms) {
        const CheckedView &v = g.inverse_rms.emplace(plan_inverse_rms_view(p, config, *options.inverse_rms));
        if (p.cl_buffers && has_negative_stride(v)) {
            throw Error(ErrorCode::stride, "the inverse RMS is an OpenCL buffer, which a view starts at the first byte of, so its strides must be >= 0");
        }
        g.inverse_rms_data = options.inverse_rms->data;
    }
    plan_grouping(p, config, grouping);
    p.num_threads = options.num_threads;
    p.parallel_loop = options.parallel_loop;

    const KernelLayout &l = p.layout;
    g.patterns = config.num_patterns;
    g.heads_per_pattern = config.num_patterns > 1 ? 1 : l.extent[1];
    const bool singleton = config.num_patterns > 1 && l.extent[1] > 1 && input_pattern_extent(p.x, p.out.shape.size()) == 1;
    g.heads_per_dx_row = singleton ? l.extent[1] : 1;
    g.dx_stride = dx_layout.x_stride;
    if (singleton) g.dx_stride[1] = 0;
    g.block_tokens = partial_block_tokens(g.heads_per_pattern * l.extent[2]);
    return g;
}



std::vector<std::int64_t> segment_sizes(const BackwardPlan &g, const Grouping &grouping) {
    if (grouping.kind() == Grouping::Kind::sizes) return grouping.group_sizes();
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(g.p.norm->config.num_modality), 0);
    sizes[0] = g.p.layout.extent[3];
    return sizes;
}


}  // namespace magi2norm::detail
