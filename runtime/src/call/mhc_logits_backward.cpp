// RMSNorm::mhc_logits_backward: every view checked first; then the kernel's dy and dphi into the
// call's own memory, the norm's backward (which checks dx and dweight before it writes them), and
// dphi copied out last, so a refused call writes nothing.
#include <algorithm>
#include <array>
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
    const Rows dx_rows = rows_of(dx_view, config);
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
        // The kernel's buffers: x (d, t), scale (d, p, m), ids (t), phi (d, j), G (j, t),
        // inverse RMS (t), dy (d, t), dphi (j, d).
        const halide_type_t f32(halide_type_float, 32);
        HalideBuffer<2> xb(storage_type(p.x.dtype)), phib(f32), gb(f32), dyb(f32), dphib(f32);
        HalideBuffer<3> scaleb(f32);
        HalideBuffer<1> idsb(halide_type_t(halide_type_int, 32)), invb(f32);
        set_dim(xb.dims[0], config.dim, rows.d_stride, "x's stride");
        set_dim(xb.dims[1], rows.tokens, rows.t_stride, "x's stride");
        set_dim(scaleb.dims[0], config.dim, 1, "D");
        set_dim(scaleb.dims[1], 1, config.dim, "D");
        set_dim(scaleb.dims[2], config.num_modality, config.dim, "D");
        set_dim(phib.dims[0], config.dim, phi_view.strides[0], "phi's stride");
        set_dim(phib.dims[1], columns, phi_view.strides[1], "phi's stride");
        set_dim(gb.dims[0], columns, g_view.strides[1], "dlogits' stride");
        set_dim(gb.dims[1], rows.tokens, g_view.strides[0], "dlogits' stride");
        set_dim(invb.dims[0], rows.tokens, inv_view.strides[0], "inverse_rms' stride");
        set_dim(dyb.dims[0], config.dim, 1, "D");
        set_dim(dyb.dims[1], rows.tokens, config.dim, "D");
        set_dim(dphib.dims[0], columns, 1, "N");
        set_dim(dphib.dims[1], config.dim, columns, "N");
        static const std::int32_t kZeroId = 0;
        const std::int32_t *id_data = p.takes_ids ? ids : !p.ids_from_sizes.empty() ? p.ids_from_sizes.data() : &kZeroId;
        set_dim(idsb.dims[0], rows.tokens, id_data == &kZeroId ? 0 : 1, "tokens");
        xb.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(x.data));
        scaleb.buffer.host = reinterpret_cast<std::uint8_t *>(const_cast<float *>(norm.scale.data()));
        idsb.buffer.host = reinterpret_cast<std::uint8_t *>(const_cast<std::int32_t *>(id_data));
        phib.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(phi.data));
        gb.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(dlogits.data));
        invb.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(options.inverse_rms->data));
        dyb.buffer.host = reinterpret_cast<std::uint8_t *>(dy.data());
        dphib.buffer.host = reinterpret_cast<std::uint8_t *>(dphi_rows.data());

        install_halide_hooks();
        CallContext context;
        resolve_parallel_loop(context, options.parallel_loop, options.num_threads);
        void *user_context = &context;
        std::array<void *, 1 + 3 + abi::kMaxGroups - 1 + 5> args{};
        std::size_t n = 0;
        args[n++] = &user_context;
        args[n++] = &xb.buffer;
        args[n++] = &scaleb.buffer;
        args[n++] = &idsb.buffer;
        // Halide reads scalar arguments through these pointers and never writes them.
        for (std::int32_t &start : p.group_starts) args[n++] = &start;
        args[n++] = &phib.buffer;
        args[n++] = &gb.buffer;
        args[n++] = &invb.buffer;
        args[n++] = &dyb.buffer;
        args[n++] = &dphib.buffer;
        if (const int status = kernel->fn(args.data()); status != 0) {
            throw Error(ErrorCode::device, "cpu kernel failed (Halide status " + std::to_string(status) + "): " + take_halide_error());
        }
    }
    // dx and dweight: the norm's backward of dy, which checks them before it writes.
    BackwardOptions norm_options = options;
    norm_options.stream = Stream{Backend::cpu};
    run_backward(norm, x_rows, ConstTensorView(dy.data(), DType::f32, {rows.tokens, config.dim}), grouping, dx_as_rows, dweight,
                 norm_options);
    copy_from_contiguous(dphi_rows.data(), dphi_view, dphi.data);
}

}  // namespace magi2norm::detail
