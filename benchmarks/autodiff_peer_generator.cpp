// The backward's Halide peer: the forward formula written plainly, differentiated by Halide's
// own autodiff (Halide::propagate_adjoints) and scheduled by an autoscheduler. A peer, not the
// product: nothing here follows the library's schedule, blocking or summation order.
//
//   xf   = float32(x[t, h, :])
//   inv  = 1 / sqrt(sum_d(xf^2) / D + eps)        (an FP32 reduction over d)
//   y    = xf * inv * scale[d]                    (one scale row, shared by the H heads)
//   dx, dscale = the adjoints of xf and scale for the adjoint dy of y
//
// One modality a call: x, dy and dx are (d, h, t) over that modality's tokens and `scale` is its
// row (w[m] + 1 in FP32), as a model's dispatcher hands each modality's tokens to its own norm;
// dscale is that modality's weight gradient (the +1 passes it through). The estimates
// (estimate_tokens, estimate_rows, estimate_dim) are the sizes the autoscheduler plans for.
#include "Halide.h"

#include "norm_pieces.h"

namespace {

using namespace Halide;
using magi2norm::algorithm::kStorageNames;
using magi2norm::algorithm::Storage;

class Magi2NormAutodiffPeer : public Generator<Magi2NormAutodiffPeer> {
public:
    GeneratorParam<Storage> in_type{"in_type", Storage::F32, kStorageNames};
    GeneratorParam<Storage> dy_type{"dy_type", Storage::F32, kStorageNames};
    GeneratorParam<Storage> dx_type{"dx_type", Storage::F32, kStorageNames};
    GeneratorParam<int> estimate_tokens{"estimate_tokens", 4096};
    GeneratorParam<int> estimate_rows{"estimate_rows", 1};
    GeneratorParam<int> estimate_dim{"estimate_dim", 3072};

    void configure() {
        x = add_input<Buffer<>>("x", magi2norm::algorithm::element_type(in_type), 3);
        dy = add_input<Buffer<>>("dy", magi2norm::algorithm::element_type(dy_type), 3);
        scale = add_input<Buffer<float>>("scale", 1);
        eps = add_input<float>("eps");
        dx = add_output<Buffer<>>("dx", magi2norm::algorithm::element_type(dx_type), 3);
        dscale = add_output<Buffer<float>>("dscale", 1);
    }

    void generate() {
        using magi2norm::algorithm::decode;
        using magi2norm::algorithm::encode;
        const Target target = get_target();
        Var d("d"), h("h"), t("t");
        Expr dim = x->dim(0).extent();

        // The decoded input and the scale row are Funcs of their own: the adjoints are taken
        // with respect to them (the storage bits are not differentiable).
        Func xf("xf"), scale_row("scale_row"), dyf("dyf");
        xf(d, h, t) = decode(in_type, (*x)(d, h, t), target);
        scale_row(d) = (*scale)(d);
        dyf(d, h, t) = decode(dy_type, (*dy)(d, h, t), target);

        RDom r(0, dim, "r");
        Func sum_squares("sum_squares"), inv_rms("inv_rms"), y("y");
        sum_squares(h, t) = 0.0f;
        sum_squares(h, t) += xf(r, h, t) * xf(r, h, t);
        inv_rms(h, t) = 1.0f / sqrt(sum_squares(h, t) / cast<float>(dim) + *eps);
        y(d, h, t) = xf(d, h, t) * inv_rms(h, t) * scale_row(d);

        // The output's bounds as (min, max) pairs, max inclusive (what the Buffer form of
        // propagate_adjoints passes; an extent there would sum one row past the end).
        const Derivative adjoints = propagate_adjoints(y, dyf, {{0, dim - 1}, {0, x->dim(1).max()}, {0, x->dim(2).max()}});
        Func dxf = adjoints(xf), dscale_row = adjoints(scale_row);
        if (!dxf.defined() || !dscale_row.defined()) throw CompileError("propagate_adjoints gave no adjoint of x or scale");

        Func dx_out("dx_out"), dscale_out("dscale_out");
        dx_out(d, h, t) = encode(dx_type, dxf(d, h, t), magi2norm::algorithm::NanBits::any, target);
        dscale_out(d) = dscale_row(d);
        *dx = dx_out;          // NOLINT: Output<Buffer> assignment from a Func
        *dscale = dscale_out;  // NOLINT

        // Dense rows, as the library's views (the runtime copies others).
        for (auto *b : {x, dy}) b->dim(0).set_stride(1);
        dx->dim(0).set_stride(1);

        const int tokens = estimate_tokens, rows = estimate_rows, length = estimate_dim;
        for (auto *b : {x, dy}) b->set_estimates({{0, length}, {0, rows}, {0, tokens}});
        scale->set_estimates({{0, length}});
        eps->set_estimate(1e-6f);
        dx->set_estimates({{0, length}, {0, rows}, {0, tokens}});
        dscale->set_estimates({{0, length}});
        if (!using_autoscheduler()) throw CompileError("the autodiff peer is built with an autoscheduler only");
    }

private:
    GeneratorInput<Buffer<>> *x = nullptr, *dy = nullptr;
    GeneratorInput<Buffer<float>> *scale = nullptr;
    GeneratorInput<float> *eps = nullptr;
    GeneratorOutput<Buffer<>> *dx = nullptr;
    GeneratorOutput<Buffer<float>> *dscale = nullptr;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Magi2NormAutodiffPeer, magi2_norm_autodiff_peer)
