#include "mhc_logits.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../devices/halide_calls.hpp"
#include "../variants/kernel_args.hpp"
#include "../variants/kernels.hpp"
#include "../views/layout.hpp"
#include "../views/overlap.hpp"
#include "../views/views.hpp"
#include "call_checks.hpp"

namespace magi2norm::detail {

namespace {

// The kernels' int32 indexing, as check_int32_axes has it: magnitudes up to 2^31 - 1.
void check_int32(std::int64_t v, const char *what) {
    if (v < -std::numeric_limits<std::int32_t>::max() || v > std::numeric_limits<std::int32_t>::max()) {
        throw Error(ErrorCode::overflow, std::string("mhc_logits: ") + what + " " + std::to_string(v) + " does not fit the kernel's int32");
    }
}

}  // namespace

Rows rows_of(const CheckedView &x, const NormConfig &config, const char *what) {
    const std::string got = std::string("mhc_logits: ") + what + " " + shape_string(x.shape);
    if (x.shape.size() != 2 && x.shape.size() != 3) throw Error(ErrorCode::shape, got + " is not [T, D] or [T, S, C]");
    std::int64_t dim = 1;
    for (std::size_t i = 1; i < x.shape.size(); ++i) dim *= x.shape[i];
    if (dim != config.dim) {
        throw Error(ErrorCode::shape, got + " has rows of " + std::to_string(dim) + " elements; the norm's D is " +
                                          std::to_string(config.dim));
    }
    check_int32_axes(x, what);
    Rows r;
    r.tokens = x.shape[0];
    r.t_stride = x.strides[0];
    const std::int64_t inner = x.strides.back();
    // Strides of extent-1 axes are 0 (check_geometry): such an axis takes the other's.
    const bool one_stride = x.shape.size() == 2 || x.shape[1] == 1 || x.shape[2] == 1 || x.strides[1] == x.shape[2] * inner;
    r.d_stride = x.shape.size() == 3 && x.shape[2] == 1 ? x.strides[1] : inner;
    if (!one_stride) {
        r.copied = true;
        r.d_stride = 1;
        r.t_stride = config.dim;
    }
    return r;
}

void set_dim(halide_dimension_t &d, std::int64_t extent, std::int64_t stride, const char *what) {
    check_int32(extent, what);
    check_int32(stride, what);
    d = halide_dimension_t(0, static_cast<std::int32_t>(extent), static_cast<std::int32_t>(stride));
}

CheckedView checked_f32(const void *data, DType dtype, const std::vector<std::int64_t> &shape, const std::vector<std::int64_t> &strides,
                        const std::vector<std::int64_t> &expected, const char *what, const char *layout) {
    CheckedView v = check_view(data, dtype, shape, strides, what);
    check_int32_axes(v, what);
    if (dtype != DType::f32) throw Error(ErrorCode::dtype, std::string("mhc_logits: ") + what + " must be f32, got " + dtype_name(dtype));
    if (v.shape.size() != expected.size() || !std::equal(expected.begin(), expected.end(), v.shape.begin())) {
        throw Error(ErrorCode::shape, std::string("mhc_logits: ") + what + " must be " + layout + " = " + shape_string(expected) +
                                          ", got " + shape_string(v.shape));
    }
    return v;
}


MhcKernelCall::MhcKernelCall(CallPlan &plan, const Rows &rows, const void *x_data, const std::int32_t *token_ids,
                             const std::optional<ParallelLoop> &loop, const std::optional<int> &threads)
    : x(storage_type(plan.x.dtype)) {
    const NormConfig &config = plan.norm->config;
    set_dim(x.dims[0], config.dim, rows.d_stride, "x's stride");
    set_dim(x.dims[1], rows.tokens, rows.t_stride, "x's stride");
    set_dim(scale.dims[0], config.dim, 1, "D");
    set_dim(scale.dims[1], 1, config.dim, "D");
    set_dim(scale.dims[2], config.num_modality, config.dim, "D");
    static const std::int32_t kZeroId = 0;
    const std::int32_t *id_data = plan.takes_ids ? token_ids : !plan.ids_from_sizes.empty() ? plan.ids_from_sizes.data() : &kZeroId;
    set_dim(ids.dims[0], rows.tokens, id_data == &kZeroId ? 0 : 1, "tokens");
    if (rows.copied) {
        x_copy.resize(static_cast<std::size_t>(plan.x.count) * dtype_size(plan.x.dtype));
        copy_to_contiguous(plan.x, x_data, x_copy.data());
    }
    x.buffer.host = rows.copied ? x_copy.data() : static_cast<std::uint8_t *>(const_cast<void *>(x_data));
    scale.buffer.host = reinterpret_cast<std::uint8_t *>(const_cast<float *>(plan.norm->scale.data()));
    ids.buffer.host = reinterpret_cast<std::uint8_t *>(const_cast<std::int32_t *>(id_data));
    install_halide_hooks();
    resolve_parallel_loop(context, loop, threads);
    args = {&user_context, &x.buffer, &scale.buffer, &ids.buffer};
    // Halide reads scalar arguments through these pointers and never writes them.
    for (std::int32_t &start : plan.group_starts) args.push_back(&start);
}

void MhcKernelCall::run(const KernelEntry &kernel) {
    if (const int status = kernel.fn(args.data()); status != 0) {
        throw Error(ErrorCode::device, "cpu kernel failed (Halide status " + std::to_string(status) + "): " + take_halide_error());
    }
    set_last_variant(kernel.name);
}

void run_mhc_logits(const NormState &norm, const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi,
                    const TensorView &logits, const MhcLogitsOptions &options) {
    const NormConfig &config = norm.config;
    if (config.num_patterns != 1) {
        throw Error(ErrorCode::config, "mhc_logits: the norm has num_patterns " + std::to_string(config.num_patterns) +
                                           "; the mHC norm has one scale row a modality (num_patterns 1)");
    }
    for (const Memory m : {x.memory, phi.memory, logits.memory}) {
        if (m != Memory::host) throw Error(ErrorCode::device, "mhc_logits runs on the CPU: its views must be in host memory");
    }
    // The views' geometry and data ranges, then their places: nothing is written before all pass.
    CallPlan p;
    p.norm = &norm;
    p.x = check_view(x.data, x.dtype, x.shape, x.strides, "input");
    Rows rows = rows_of(p.x, config);
    if (phi.shape.size() == 2 && phi.shape[1] < 1) throw Error(ErrorCode::shape, "mhc_logits: phi has no columns (N = 0)");
    const std::int64_t columns = phi.shape.size() == 2 ? phi.shape[1] : 0;
    const CheckedView phi_view = checked_f32(phi.data, phi.dtype, phi.shape, phi.strides, {config.dim, columns}, "phi", "[D, N]");
    const CheckedView out = checked_f32(logits.data, logits.dtype, logits.shape, logits.strides, {rows.tokens, columns}, "logits", "[T, N]");
    check_no_self_overlap(out, "logits");
    std::optional<CheckedView> inv;
    if (options.inverse_rms) {
        const TensorView &v = *options.inverse_rms;
        if (v.memory != Memory::host) throw Error(ErrorCode::device, "mhc_logits runs on the CPU: its views must be in host memory");
        inv = checked_f32(v.data, v.dtype, v.shape, v.strides, {rows.tokens}, "inverse_rms", "[T]");
        check_no_self_overlap(*inv, "inverse_rms");
    }
    p.layout.has_token_axis = true;
    p.layout.extent[3] = rows.tokens;
    plan_grouping(p, config, grouping);
    const Region out_region = host_region(out, logits.data, "logits");
    const Region x_region = host_region(p.x, x.data, "input");
    const Region phi_region = host_region(phi_view, phi.data, "phi");
    const char *why = "the kernel would overwrite what it reads";
    check_disjoint(out_region, "logits", x_region, "input", why);
    check_disjoint(out_region, "logits", phi_region, "phi", why);
    Region inv_region;
    if (inv) {
        inv_region = host_region(*inv, options.inverse_rms->data, "inverse_rms");
        check_disjoint(inv_region, "inverse_rms", x_region, "input", why);
        check_disjoint(inv_region, "inverse_rms", phi_region, "phi", why);
        check_disjoint(inv_region, "inverse_rms", out_region, "logits", "one output would overwrite the other");
    }
    const std::int32_t *ids = grouping.kind() == Grouping::Kind::ids ? grouping.token_ids() : nullptr;
    if (p.checks_ids) {
        if (inv) check_ids(p, ids, {{&out_region, "logits"}, {&inv_region, "inverse_rms"}});
        else check_ids(p, ids, {{&out_region, "logits"}});
    }
    if (rows.tokens == 0) return;

    const std::int64_t bytes = p.x.count * static_cast<std::int64_t>(dtype_size(p.x.dtype)) + out.count * 4;
    const KernelEntry *kernel = find_kernel(Backend::cpu, p.x.dtype, DType::f32, Form::mhc_logits, false, 0, {config.dim, bytes});
    if (kernel == nullptr) throw Error(ErrorCode::device, std::string("mhc_logits: this library has no CPU variant for x in ") + dtype_name(p.x.dtype));

    // The kernel's own buffers, after MhcKernelCall's: phi (d, j), eps, logits (j, t), inverse RMS (t).
    MhcKernelCall call(p, rows, x.data, ids, options.parallel_loop, options.num_threads);
    HalideBuffer<2> phib(MhcKernelCall::kF32), outb(MhcKernelCall::kF32);
    HalideBuffer<1> invb(MhcKernelCall::kF32);
    set_dim(phib.dims[0], config.dim, phi_view.strides[0], "phi's stride");
    set_dim(phib.dims[1], columns, phi_view.strides[1], "phi's stride");
    set_dim(outb.dims[0], columns, out.strides[1], "logits' stride");
    set_dim(outb.dims[1], rows.tokens, out.strides[0], "logits' stride");
    std::vector<float> scratch;  // the inverse RMS when the caller wants none
    if (!inv) scratch.resize(static_cast<std::size_t>(rows.tokens));
    set_dim(invb.dims[0], rows.tokens, inv ? inv->strides[0] : 1, "inverse_rms' stride");
    phib.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(phi.data));
    outb.buffer.host = static_cast<std::uint8_t *>(logits.data);
    invb.buffer.host = inv ? static_cast<std::uint8_t *>(options.inverse_rms->data) : reinterpret_cast<std::uint8_t *>(scratch.data());
    float eps = config.eps;
    call.args.insert(call.args.end(), {&eps, &phib.buffer, &outb.buffer, &invb.buffer});
    call.run(*kernel);
}

}  // namespace magi2norm::detail
