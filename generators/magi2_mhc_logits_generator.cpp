// The mHC logits (../shared/SPEC.md, "The mHC logits"): the mHC norm fused with its one
// consumer, the projection to the hyper-connection logits, as one Halide algorithm.
//
//   xf       = float32(x[d, t])                               (d < D = S*C)
//   inv      = the norm's inverse RMS of row t                (norm_pieces.h: the same row sum)
//   y32      = (xf * inv) * scale[d, 0, modality(t)]          (the norm's FP32 output)
//   chain_k  = sum over d = k, k + 4, ... of y32[d] * phi[d, j]   (exact FP64 products, in order)
//   logits   = float32((chain_0 + chain_1) + (chain_2 + chain_3))
//
// y32 is never written out: a token's row is read once, and its N logits and its inverse RMS
// are all that leave. The inverse RMS is the norm forward's bit for bit (the same stages), and
// the product's order is fixed here (abi::kLogitChains), not by a schedule, so every target and
// thread count gives the same bits. The runtime maps [T, D] and [T, S, C] inputs onto (d, t).
//
// Schedules live in schedules/, apart from this file; the generator only picks one.
#include "Halide.h"

#include <string>
#include <vector>

#include "cpu_mhc_logits_schedule.h"
#include "cuda_rounding.h"
#include "kernel_abi.h"
#include "mhc_logits_stages.h"
#include "norm_pieces.h"

namespace magi2norm::algorithm {

using namespace Halide;

class Magi2MhcLogits : public Generator<Magi2MhcLogits> {
public:
    GeneratorParam<Storage> in_type{"in_type", Storage::BF16, kStorageNames};
    // The norm's output dtype; the logits are FP32 whatever it is (the product reads y32).
    GeneratorParam<Storage> out_type{"out_type", Storage::F32, kStorageNames};

    // The forward's arguments in its order (x, scale, token_modality, group_start_1 .., eps),
    // then phi; outputs the logits and the inverse RMS.
    void configure() {
        x = add_input<Buffer<>>("x", element_type(in_type), 2);  // (d, t), any strides
        scale = add_input<Buffer<float>>("scale", 3);            // (d, p, m): float32(W(w + 1)), P = 1
        token_modality = add_input<Buffer<int32_t>>("token_modality", 1);
        for (int m = 1; m < abi::kMaxGroups; ++m) group_starts.push_back(add_input<int32_t>("group_start_" + std::to_string(m)));
        eps = add_input<float>("eps");
        phi = add_input<Buffer<float>>("phi", 2);                     // (d, j): [D, N], any strides
        logits = add_output<Buffer<float>>("logits", 2);              // (j, t)
        inverse_rms_out = add_output<Buffer<float>>("inverse_rms", 1);  // (t)
    }

    // Every CUDA kernel rounds each operation where the CPU does (cuda_rounding.h).
    void schedule() { round_each_cuda_operation(get_pipeline(), get_target()); }

    void generate() {
        schedules::MhcLogitsStages s;
        Var d = s.d, t = s.t, j = s.j, h = s.h, a = s.a;
        s.dim = x->dim(0).extent();
        s.columns = phi->dim(1).extent();
        s.x_inner_stride = x->dim(0).stride();
        s.phi_column_stride = phi->dim(1).stride();
        s.in_bytes = element_type(in_type).bytes();

        Func xf("xf");
        xf(d, t) = decode(in_type, (*x)(d, t), get_target());
        // The norm's row sum of squares and inverse RMS, on rows (d, h, a, t) with h = a = 0.
        Func square("square");
        square(d, h, a, t) = xf(d, t) * xf(d, t);
        RowSum sum = row_sum(square, s.dim, abi::kSumSteps, s.lane, "sum_squares");
        s.blocks = sum.blocks;
        s.lane_sums = sum.lane_sums;
        s.sum_squares = sum.sum;
        s.inv_rms = Func("inv_rms");
        s.inv_rms(t) = algorithm::inverse_rms(s.sum_squares(0, 0, t), s.dim, *eps);
        s.modality = Func("modality");
        std::vector<Expr> starts;
        for (auto *start : group_starts) starts.push_back(*start);
        s.modality(t) = modality_of((*token_modality)(t), starts, t, scale->dim(2).extent());
        s.y32 = Func("y32");
        s.y32(d, t) = normalized(xf(d, t), s.inv_rms(t), (*scale)(d, 0, s.modality(t)));

        // The product: exact FP64 products (24-bit by 24-bit significands), added chain by chain
        // in order of d; positions past the row are zeros, which add exactly.
        constexpr int kChains = abi::kLogitChains;
        Func y_padded = BoundaryConditions::constant_exterior(s.y32, 0.0f, {{0, s.dim}});
        Func phi_padded = BoundaryConditions::constant_exterior(*phi, 0.0f, {{0, s.dim}});
        s.y64 = Func("y64");
        s.y64(d, t) = cast<double>(y_padded(d, t));
        s.phi64 = Func("phi64");
        s.phi64(d, j) = cast<double>(phi_padded(d, j));
        s.steps = RDom(0, (s.dim + kChains - 1) / kChains, "steps");
        Expr at = s.chain + kChains * s.steps;
        s.chains = Func("chains");
        s.chains(s.chain, j, t) = cast<double>(0);
        s.chains(s.chain, j, t) += s.y64(at, t) * s.phi64(at, j);
        static_assert(kChains == 4, "the chains' tree below adds four");
        s.logits = Func("logits_out");
        s.logits(j, t) = cast<float>((s.chains(0, j, t) + s.chains(1, j, t)) + (s.chains(2, j, t) + s.chains(3, j, t)));
        *logits = s.logits;  // NOLINT: Output<Buffer> assignment from a Func
        s.inverse_rms = Func("inverse_rms_out");
        s.inverse_rms(t) = s.inv_rms(t);
        *inverse_rms_out = s.inverse_rms;  // NOLINT: Output<Buffer> assignment from a Func

        set_layout(s);
        if (get_target().has_gpu_feature()) throw CompileError("magi2_mhc_logits: a CPU pipeline so far");
        schedules::schedule_cpu_mhc_logits(s, get_target());
    }

private:
    GeneratorInput<Buffer<>> *x = nullptr;
    GeneratorInput<Buffer<float>> *scale = nullptr;
    GeneratorInput<Buffer<int32_t>> *token_modality = nullptr;
    std::vector<GeneratorInput<int32_t> *> group_starts;  // cu[1 .. kMaxGroups - 1]
    GeneratorInput<float> *eps = nullptr;
    GeneratorInput<Buffer<float>> *phi = nullptr;
    GeneratorOutput<Buffer<float>> *logits = nullptr;
    GeneratorOutput<Buffer<float>> *inverse_rms_out = nullptr;

    // x, phi and the outputs at any strides; phi's rows are the norm's D, the logits' columns
    // phi's N, and the inverse RMS spans the logits' tokens.
    void set_layout(const schedules::MhcLogitsStages &s) {
        x->dim(0).set_stride(Expr());
        phi->dim(0).set_stride(Expr());
        phi->dim(0).set_bounds(0, s.dim);
        logits->dim(0).set_stride(Expr());
        logits->dim(0).set_bounds(0, s.columns);
        token_modality->dim(0).set_stride(Expr());
        scale->dim(1).set_stride(Expr());
        inverse_rms_out->dim(0).set_stride(Expr());
        inverse_rms_out->dim(0).set_bounds(logits->dim(1).min(), logits->dim(1).extent());
    }
};

}  // namespace magi2norm::algorithm

HALIDE_REGISTER_GENERATOR(magi2norm::algorithm::Magi2MhcLogits, magi2_mhc_logits)
