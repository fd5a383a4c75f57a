// RMSNorm::mhc_logits_backward: every view checked first; then the kernel's dy and dphi into the
// call's own memory, the norm's backward (which checks dx and dweight before it writes them), and
// dphi copied out last, so a refused call writes nothing.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "../variants/kernel_args.hpp"
#include "../variants/kernels.hpp"
#include "../views/overlap.hpp"
#include "backward.hpp"
#include "call_checks.hpp"
#include "mhc_logits.hpp"

namespace magi2norm::detail {

namespace {

// x's (or dx's) view as the norm's [T, D] rows; Error(stride) where its streams are not one
// stride apart (the backward takes no copies).
template <typename Pointer>
BasicTensorView<Pointer> as_rows(const BasicTensorView<Pointer> &v, const Rows &rows, std::int64_t dim, const char *what) {
    if (rows.copied) {
        throw Error(ErrorCode::stride, std::string("mhc_logits_backward: ") + what + "'s streams must be one stride apart along its rows");
    }
    return {v.data, v.dtype, {rows.tokens, dim}, {rows.t_stride, rows.d_stride}, v.memory};
}

}  // namespace

void run_mhc_logits_backward(const NormState &norm, const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi,
                             const ConstTensorView &dlogits, const TensorView &dx, const TensorView &dweight, const TensorView &dphi,
                             const BackwardOptions &options) {
    const NormConfig &config = norm.config;
    if (config.num_patterns != 1) {
        throw Error(ErrorCode::config, "mhc_logits_backward: the norm has num_patterns " + std::to_string(config.num_patterns) +
                                           "; the mHC norm has one scale row a modality (num_patterns 1)");
    }
    if (!options.inverse_rms) {
        throw Error(ErrorCode::config, "mhc_logits_backward needs the forward's inverse RMS (BackwardOptions::inverse_rms)");
    }
    for (const Memory m : {x.memory, phi.memory, dlogits.memory, dx.memory, dphi.memory, options.inverse_rms->memory}) {
        if (m != Memory::host) throw Error(ErrorCode::device, "mhc_logits_backward runs on the CPU: its views must be in host memory");
    }
    CallPlan p;
    p.norm = &norm;
    p.x = check_view(x.data, x.dtype, x.shape, x.strides, "input");
    const Rows rows = rows_of(p.x, config);
    const ConstTensorView x_rows = as_rows(x, rows, config.dim, "x");
    CheckedView dx_view;
    check_geometry(dx_view, dx.dtype, dx.shape, dx.strides, "dx");
    if (dx_view.shape != p.x.shape) {
        throw Error(ErrorCode::shape, "mhc_logits_backward: dx " + shape_string(dx_view.shape) + " must have x's shape " + shape_string(p.x.shape));
    }
    const Rows dx_rows = rows_of(dx_view, config, "dx");
    const TensorView dx_as_rows = as_rows(dx, dx_rows, config.dim, "dx");
    const std::int64_t columns = phi.shape.size() == 2 ? phi.shape[1] : 0;
    if (columns < 1 && phi.shape.size() == 2) throw Error(ErrorCode::shape, "mhc_logits_backward: phi has no columns (N = 0)");
    const CheckedView phi_view = checked_f32(phi.data, phi.dtype, phi.shape, phi.strides, {config.dim, columns}, "phi", "[D, N]");
    const CheckedView g_view = checked_f32(dlogits.data, dlogits.dtype, dlogits.shape, dlogits.strides, {rows.tokens, columns}, "dlogits", "[T, N]");
    const CheckedView inv_view = checked_f32(options.inverse_rms->data, options.inverse_rms->dtype, options.inverse_rms->shape,
                                             options.inverse_rms->strides, {rows.tokens}, "inverse_rms", "[T]");
    const CheckedView dphi_view = checked_f32(dphi.data, dphi.dtype, dphi.shape, dphi.strides, {config.dim, columns}, "dphi", "[D, N]");
    check_no_self_overlap(dphi_view, "dphi");
    p.layout.has_token_axis = true;
    p.layout.extent[3] = rows.tokens;
    plan_grouping(p, config, grouping);
    // dphi apart from everything the call reads and from the norm's outputs.
    const Region dphi_region = host_region(dphi_view, dphi.data, "dphi");
    const char *why = "the call would overwrite what it reads";
    check_disjoint(dphi_region, "dphi", host_region(p.x, x.data, "input"), "input", why);
    check_disjoint(dphi_region, "dphi", host_region(phi_view, phi.data, "phi"), "phi", why);
    check_disjoint(dphi_region, "dphi", host_region(g_view, dlogits.data, "dlogits"), "dlogits", why);
    check_disjoint(dphi_region, "dphi", host_region(inv_view, options.inverse_rms->data, "inverse_rms"), "inverse_rms", why);
    check_disjoint(dphi_region, "dphi", host_region(dx_view, dx.data, "dx"), "dx", "one output would overwrite another");
    const CheckedView dweight_view = check_view(dweight.data, dweight.dtype, dweight.shape, dweight.strides, "dweight");
    check_disjoint(dphi_region, "dphi", host_region(dweight_view, dweight.data, "dweight"), "dweight", "one output would overwrite another");
    const std::int32_t *ids = grouping.kind() == Grouping::Kind::ids ? grouping.token_ids() : nullptr;
    if (p.checks_ids) check_ids(p, ids, {{&dphi_region, "dphi"}});

    // dy (the norm's output's gradient, [T, D] FP32) and dphi, in the call's memory.
    std::vector<float> dy(static_cast<std::size_t>(rows.tokens * config.dim));
    std::vector<float> dphi_rows(static_cast<std::size_t>(config.dim * columns), 0.0f);
    if (rows.tokens > 0) {
        const std::int64_t bytes = p.x.count * static_cast<std::int64_t>(dtype_size(p.x.dtype)) + p.x.count * 4;
        const KernelEntry *kernel = find_kernel(Backend::cpu, p.x.dtype, DType::f32, Form::mhc_logits_backward, false, 0, {config.dim, bytes});
        if (kernel == nullptr) {
            throw Error(ErrorCode::device, std::string("mhc_logits_backward: this library has no CPU variant for x in ") + dtype_name(p.x.dtype));
        }
        // The kernel's own buffers, after MhcKernelCall's: phi (d, j), G (j, t), inverse RMS (t),
        // dy (d, t), dphi (j, d).
        MhcKernelCall call(p, rows, x.data, ids, options.parallel_loop, options.num_threads);
        HalideBuffer<2> phib(MhcKernelCall::kF32), gb(MhcKernelCall::kF32), dyb(MhcKernelCall::kF32), dphib(MhcKernelCall::kF32);
        HalideBuffer<1> invb(MhcKernelCall::kF32);
        set_dim(phib.dims[0], config.dim, phi_view.strides[0], "phi's stride");
        set_dim(phib.dims[1], columns, phi_view.strides[1], "phi's stride");
        set_dim(gb.dims[0], columns, g_view.strides[1], "dlogits' stride");
        set_dim(gb.dims[1], rows.tokens, g_view.strides[0], "dlogits' stride");
        set_dim(invb.dims[0], rows.tokens, inv_view.strides[0], "inverse_rms' stride");
        set_dim(dyb.dims[0], config.dim, 1, "D");
        set_dim(dyb.dims[1], rows.tokens, config.dim, "D");
        set_dim(dphib.dims[0], columns, 1, "N");
        set_dim(dphib.dims[1], config.dim, columns, "N");
        phib.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(phi.data));
        gb.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(dlogits.data));
        invb.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(options.inverse_rms->data));
        dyb.buffer.host = reinterpret_cast<std::uint8_t *>(dy.data());
        dphib.buffer.host = reinterpret_cast<std::uint8_t *>(dphi_rows.data());
        call.args.insert(call.args.end(), {&phib.buffer, &gb.buffer, &invb.buffer, &dyb.buffer, &dphib.buffer});
        call.run(*kernel);
    }
    // dx and dweight: the norm's backward of dy, which checks them before it writes.
    BackwardOptions norm_options = options;
    norm_options.stream = Stream{Backend::cpu};
    run_backward(norm, x_rows, ConstTensorView(dy.data(), DType::f32, {rows.tokens, config.dim}), grouping, dx_as_rows, dweight,
                 norm_options);
    copy_from_contiguous(dphi_rows.data(), dphi_view, dphi.data);
}

}  // namespace magi2norm::detail
