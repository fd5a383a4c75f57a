#include "cpu_mhc_logits_backward_schedule.h"

namespace magi2norm::schedules {

using namespace Halide;

namespace {

// Tokens a task of dy; rows of D a block of dy's sums (eight FP64 vectors on AVX-512, in
// registers while phi's columns pass) and a task of dphi's sums (64 rows x N columns of FP64
// accumulators, 12 KB at N = 24, in L1 while every token passes).
constexpr int kTokensPerTask = 8;
constexpr int kRowsPerBlock = 64;
constexpr int kModelColumns = 24;

}  // namespace

void schedule_cpu_mhc_logits_backward(MhcLogitsBackwardStages &s, const Target &target) {
    const int f32_vec = target.natural_vector_size(Float(32));
    const int f64_vec = target.natural_vector_size(Float(64));
    Var task("task"), t_in("t_in"), block("block"), d_in("d_in");

    // phi widened once, rows of D dense for dy's vectors.
    s.phi64.compute_root().vectorize(s.d, f64_vec, TailStrategy::GuardWithIf);

    // dy: per token, blocks of D whose sums stay in registers over every column of phi.
    s.dy.split(s.t, task, t_in, kTokensPerTask, TailStrategy::GuardWithIf).parallel(task);
    s.dy.split(s.d, block, d_in, kRowsPerBlock, TailStrategy::GuardWithIf).reorder(d_in, block, t_in, task);
    s.dy.vectorize(d_in, f32_vec, TailStrategy::GuardWithIf);
    s.dy_sum.compute_at(s.dy, block).vectorize(s.d, f64_vec, TailStrategy::GuardWithIf);
    s.dy_sum.update().reorder(s.d, s.over_columns).vectorize(s.d, f64_vec, TailStrategy::GuardWithIf).unroll(s.d);

    // dphi: tasks of rows of D, each summing every token in order; the task's normalized rows
    // made a token at a time in vectors, the columns of G in vectors.
    s.dphi.split(s.d, task, d_in, kRowsPerBlock, TailStrategy::GuardWithIf).parallel(task);
    s.dphi.vectorize(s.j, f32_vec, TailStrategy::GuardWithIf);
    s.dphi_sum.compute_at(s.dphi, task).vectorize(s.j, f64_vec, TailStrategy::GuardWithIf);
    Stage sums = s.dphi_sum.update();
    sums.reorder(s.j, s.d, s.over_tokens);
    s.y64.compute_at(s.dphi_sum, s.over_tokens).vectorize(s.d, f64_vec, TailStrategy::GuardWithIf);
    sums.specialize(s.columns == kModelColumns).vectorize(s.j, f64_vec).unroll(s.j);
    sums.vectorize(s.j, f64_vec, TailStrategy::GuardWithIf);
}

}  // namespace magi2norm::schedules
