#include "cpu_mhc_logits_schedule.h"

namespace magi2norm::schedules {

using namespace Halide;

namespace {

// Tokens a parallel task (at most; fewer where the call has fewer than twice as many, so that two
// threads share it), the tile of them that shares each block of phi's rows: a token is D products
// with every column of phi (24 at the model's N), and phi ([12288, 24] FP32: 1.2 MB) outgrows
// L2, so each block of phi is widened into L1 once for the task's tokens instead of once a token
// (16 tokens: 1.12x the rate of 8 at T = 256).
constexpr int kTokensPerTask = 16;
// Steps of the product (kLogitChains rows of phi each) in a block: 128 rows of 24 columns in
// FP64, 24 KB, which stay in L1 while the task's tokens pass over them (64 steps, 48 KB, ran from
// L2 at 0.71x the rate).
constexpr int kStepsPerBlock = 32;
// The model's N (S + S + S*S at S = 4), for which the columns are unrolled so that each chain's
// accumulators stay in registers across a block.
constexpr int kModelColumns = 24;

}  // namespace

void schedule_cpu_mhc_logits(MhcLogitsStages &s, const Target &target) {
    // The inverse RMS output reads its own copies of the row sums (a second pass over x: the
    // product's FMAs, not x's bytes, bound the call).
    Func inv = s.inv_rms.clone_in(s.inverse_rms);
    Func sum = s.sum_squares.clone_in(inv);
    Func lanes = s.lane_sums.clone_in(sum);
    const int f32_vec = target.natural_vector_size(Float(32));
    const int f64_vec = target.natural_vector_size(Float(64));

    Var task("task"), t_in("t_in");
    RVar block("block"), step("step");
    Expr tokens = s.logits.output_buffer().dim(1).extent();
    Expr per_task = clamp((tokens + 1) / 2, 1, kTokensPerTask);
    s.logits.split(s.t, task, t_in, per_task, TailStrategy::GuardWithIf).parallel(task);
    // The task's rows first: their lane sums and inverse RMS, then their normalized rows widened
    // to FP64 (in vectors), which the product reads a block at a time.
    s.inv_rms.compute_at(s.logits, task);
    s.lane_sums.compute_at(s.inv_rms, s.t).vectorize(s.lane);
    s.lane_sums.update().specialize(s.x_inner_stride == 1).vectorize(s.lane);
    s.modality.compute_at(s.logits, task);
    s.y64.compute_at(s.logits, task).vectorize(s.d, f64_vec, TailStrategy::GuardWithIf);
    // The chains of the task's tokens, columns innermost: per block of phi's rows, each token's
    // chains over the block, in vectors of columns with the four chains unrolled.
    s.chains.reorder_storage(s.j, s.chain, s.t);
    s.chains.compute_at(s.logits, task).vectorize(s.j, f64_vec, TailStrategy::GuardWithIf);
    Stage product = s.chains.update();
    product.split(s.steps, block, step, kStepsPerBlock, TailStrategy::GuardWithIf).reorder(s.j, s.chain, step, s.t, block);
    // A block of phi's rows widened once for the task's tokens.
    s.phi64.reorder_storage(s.j, s.d).compute_at(s.chains, block).vectorize(s.j, f64_vec, TailStrategy::GuardWithIf);
    // The model's phi (24 columns, row-major): the chains' extents are constants there, so all
    // twelve vector accumulators stay in registers across a block and each phi row loads dense.
    Expr model_phi = s.columns == kModelColumns && s.phi_column_stride == 1;
    s.logits.specialize(model_phi).vectorize(s.j, f32_vec, TailStrategy::GuardWithIf);
    product.specialize(model_phi).unroll(s.chain).vectorize(s.j, f64_vec).unroll(s.j);
    product.unroll(s.chain).vectorize(s.j, f64_vec, TailStrategy::GuardWithIf);
    s.logits.vectorize(s.j, f32_vec, TailStrategy::GuardWithIf);

    s.inverse_rms.split(s.t, task, t_in, 64, TailStrategy::GuardWithIf).parallel(task);
    sum.compute_at(s.inverse_rms, t_in);
    lanes.compute_at(sum, Var::outermost()).vectorize(s.lane);
    lanes.update().specialize(s.x_inner_stride == 1).vectorize(s.lane);
}

}  // namespace magi2norm::schedules
