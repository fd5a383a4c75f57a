// CUDA kernels that round where the algorithm rounds. Halide's PTX backend builds with FP-op
// fusion on whatever strict_float says, so LLVM contracts a multiply and an add into one fma
// (g - n * mean in the backward), and ptxas may fuse the bare mul.f32 / add.f32 it leaves. A
// CPU rounds each operation, so those kernels would differ from the CPU's bits. This pass, run
// last in lowering, turns every FP32 and FP64 add, subtract and multiply inside a CUDA kernel
// into NVVM's explicitly rounded add.rn / mul.rn, which neither LLVM nor ptxas fuses: the PTX
// then says what the CPU computes (tests/bits/rounding_scan.py reads it back).
#pragma once

#include "Halide.h"

namespace magi2norm::algorithm {

class RoundEachCudaOperation : public Halide::Internal::IRMutator {
    using IRMutator::visit;
    int kernel_depth = 0;

    static bool rounded(const Halide::Type &t) { return t.is_float() && (t.bits() == 32 || t.bits() == 64); }

    Halide::Expr call(const char *op, const Halide::Expr &a, const Halide::Expr &b) {
        using namespace Halide;
        const std::string name = std::string("llvm.nvvm.") + op + (a.type().bits() == 64 ? ".rn.d" : ".rn.f");
        if (a.type().is_scalar()) return Internal::Call::make(a.type(), name, {a, b}, Internal::Call::PureExtern);
        // A vector operation, one rounded operation a lane (PTX has no FP32 vector arithmetic).
        std::vector<Expr> lanes;
        for (int i = 0; i < a.type().lanes(); ++i) {
            lanes.push_back(Internal::Call::make(a.type().element_of(), name,
                                                 {Internal::Shuffle::make_extract_element(a, i), Internal::Shuffle::make_extract_element(b, i)},
                                                 Internal::Call::PureExtern));
        }
        return Internal::Shuffle::make_concat(lanes);
    }

    Halide::Expr rewrite(const char *op, const Halide::Expr &a, const Halide::Expr &b, bool negate_b) {
        using namespace Halide;
        Expr x = mutate(a), y = mutate(b);
        if (negate_b) {
            // a - b = a + (-b): the negation flips the sign bit (exact, signed zeros too), so the
            // sum rounds as the difference does.
            const Type bits = y.type().with_code(halide_type_uint);
            y = reinterpret(y.type(), reinterpret(bits, y) ^ Internal::make_const(bits, uint64_t{1} << (bits.bits() - 1)));
        }
        return call(op, x, y);
    }

public:
    Halide::Internal::Stmt visit(const Halide::Internal::For *op) override {
        const bool kernel = Halide::Internal::is_gpu(op->for_type);
        kernel_depth += kernel;
        Halide::Internal::Stmt s = IRMutator::visit(op);
        kernel_depth -= kernel;
        return s;
    }
    Halide::Expr visit(const Halide::Internal::Add *op) override {
        return kernel_depth > 0 && rounded(op->type) ? rewrite("add", op->a, op->b, false) : IRMutator::visit(op);
    }
    Halide::Expr visit(const Halide::Internal::Mul *op) override {
        return kernel_depth > 0 && rounded(op->type) ? rewrite("mul", op->a, op->b, false) : IRMutator::visit(op);
    }
    Halide::Expr visit(const Halide::Internal::Sub *op) override {
        return kernel_depth > 0 && rounded(op->type) ? rewrite("add", op->a, op->b, true) : IRMutator::visit(op);
    }
    Halide::Expr visit(const Halide::Internal::Call *op) override {
        using Halide::Internal::Call;
        if (kernel_depth > 0 && rounded(op->type) && op->args.size() == 2) {
            if (op->is_intrinsic(Call::strict_add)) return rewrite("add", op->args[0], op->args[1], false);
            if (op->is_intrinsic(Call::strict_mul)) return rewrite("mul", op->args[0], op->args[1], false);
            if (op->is_intrinsic(Call::strict_sub)) return rewrite("add", op->args[0], op->args[1], true);
        }
        return IRMutator::visit(op);
    }
};

// Adds the pass to `pipeline` when `target` has CUDA.
inline void round_each_cuda_operation(Halide::Pipeline pipeline, const Halide::Target &target) {
    if (target.has_feature(Halide::Target::CUDA)) pipeline.add_custom_lowering_pass(new RoundEachCudaOperation);
}

}  // namespace magi2norm::algorithm
