// The mHC logits' backward (../shared/SPEC.md, "The mHC logits", L3), for G = dlogits [T, N]:
//
//   y32[d, t]  = the forward's normalized row (norm_pieces.h's normalized, from the forward's
//                inverse RMS: the same bits the forward's product read)
//   dy[d, t]   = float32(sum over j = 0, 1, ... of G[j, t] * phi[d, j])      (FP64, in order of j)
//   dphi[j, d] = float32(sum over t = 0, 1, ... of y32[d, t] * G[j, t])     (FP64, in order of t)
//
// Each product is of two FP32 values, exact in FP64, and each sum's order is fixed here, so
// every target and thread count gives the same bits. dy is the gradient of the norm's FP32
// output, which the norm's own backward (magi2_norm_backward) turns into dx and the weight's
// gradient.
//
// Schedules live in schedules/, apart from this file; the generator only picks one.
#include "Halide.h"

#include <string>
#include <vector>

#include "cpu_mhc_logits_backward_schedule.h"
#include "cuda_rounding.h"
#include "kernel_abi.h"
#include "mhc_logits_stages.h"
#include "norm_pieces.h"

namespace magi2norm::algorithm {

using namespace Halide;

class Magi2MhcLogitsBackward : public Generator<Magi2MhcLogitsBackward> {
public:
    GeneratorParam<Storage> in_type{"in_type", Storage::BF16, kStorageNames};

    // The forward's arguments in its order (x, scale, token_modality, group_start_1 ..), then
    // phi, G and the forward's inverse RMS; outputs dy and dphi.
    void configure() {
        x = add_input<Buffer<>>("x", element_type(in_type), 2);  // (d, t), any strides
        scale = add_input<Buffer<float>>("scale", 3);            // (d, p, m), P = 1
        token_modality = add_input<Buffer<int32_t>>("token_modality", 1);
        for (int m = 1; m < abi::kMaxGroups; ++m) group_starts.push_back(add_input<int32_t>("group_start_" + std::to_string(m)));
        phi = add_input<Buffer<float>>("phi", 2);                  // (d, j)
        dlogits = add_input<Buffer<float>>("dlogits", 2);          // (j, t)
        inverse_rms = add_input<Buffer<float>>("inverse_rms", 1);  // (t), the forward's
        dy_out = add_output<Buffer<float>>("dy", 2);               // (d, t)
        dphi_out = add_output<Buffer<float>>("dphi", 2);           // (j, d)
    }

    // Every CUDA kernel rounds each operation where the CPU does (cuda_rounding.h).
    void schedule() { round_each_cuda_operation(get_pipeline(), get_target()); }

    void generate() {
        schedules::MhcLogitsBackwardStages s;
        Var d = s.d, t = s.t, j = s.j;
        s.dim = x->dim(0).extent();
        s.columns = phi->dim(1).extent();
        s.tokens = x->dim(1).extent();
        s.phi_column_stride = phi->dim(1).stride();

        std::vector<Expr> starts;
        for (auto *start : group_starts) starts.push_back(*start);
        s.modality = Func("modality");
        s.modality(t) = modality_of((*token_modality)(t), starts, t, scale->dim(2).extent());
        s.y64 = Func("y64");
        s.y64(d, t) = cast<double>(normalized(decode(in_type, (*x)(d, t), get_target()), (*inverse_rms)(t), (*scale)(d, 0, s.modality(t))));
        s.g64 = Func("g64");
        s.g64(j, t) = cast<double>((*dlogits)(j, t));
        s.phi64 = Func("phi64");
        s.phi64(d, j) = cast<double>((*phi)(d, j));

        s.over_columns = RDom(0, s.columns, "over_columns");
        s.dy_sum = Func("dy_sum");
        s.dy_sum(d, t) = cast<double>(0);
        s.dy_sum(d, t) += s.g64(s.over_columns, t) * s.phi64(d, s.over_columns);
        s.dy = Func("dy_out");
        s.dy(d, t) = cast<float>(s.dy_sum(d, t));

        s.over_tokens = RDom(0, s.tokens, "over_tokens");
        s.dphi_sum = Func("dphi_sum");
        s.dphi_sum(j, d) = cast<double>(0);
        s.dphi_sum(j, d) += s.y64(d, s.over_tokens) * s.g64(j, s.over_tokens);
        s.dphi = Func("dphi_out");
        s.dphi(j, d) = cast<float>(s.dphi_sum(j, d));

        *dy_out = s.dy;      // NOLINT: Output<Buffer> assignment from a Func
        *dphi_out = s.dphi;  // NOLINT: Output<Buffer> assignment from a Func
        set_layout(s);
        if (get_target().has_gpu_feature()) throw CompileError("magi2_mhc_logits_backward: a CPU pipeline so far");
        schedules::schedule_cpu_mhc_logits_backward(s, get_target());
    }

private:
    GeneratorInput<Buffer<>> *x = nullptr;
    GeneratorInput<Buffer<float>> *scale = nullptr;
    GeneratorInput<Buffer<int32_t>> *token_modality = nullptr;
    std::vector<GeneratorInput<int32_t> *> group_starts;
    GeneratorInput<Buffer<float>> *phi = nullptr, *dlogits = nullptr, *inverse_rms = nullptr;
    GeneratorOutput<Buffer<float>> *dy_out = nullptr, *dphi_out = nullptr;

    // Inputs at any strides; every axis of the same length the same extent (the runtime checks
    // them first): phi's rows D, G's columns N and tokens T, dy [D, T], dphi [N, D].
    void set_layout(const schedules::MhcLogitsBackwardStages &s) {
        x->dim(0).set_stride(Expr());
        phi->dim(0).set_stride(Expr()).set_bounds(0, s.dim);
        dlogits->dim(0).set_stride(Expr()).set_bounds(0, s.columns);
        dlogits->dim(1).set_bounds(0, s.tokens);
        x->dim(1).set_min(0);
        token_modality->dim(0).set_stride(Expr());
        scale->dim(1).set_stride(Expr());
        inverse_rms->dim(0).set_stride(Expr()).set_bounds(0, s.tokens);
        dy_out->dim(0).set_bounds(0, s.dim).set_stride(1);
        dy_out->dim(1).set_bounds(0, s.tokens);
        dphi_out->dim(0).set_bounds(0, s.columns).set_stride(Expr());
        dphi_out->dim(1).set_bounds(0, s.dim);
    }
};

}  // namespace magi2norm::algorithm

HALIDE_REGISTER_GENERATOR(magi2norm::algorithm::Magi2MhcLogitsBackward, magi2_mhc_logits_backward)
