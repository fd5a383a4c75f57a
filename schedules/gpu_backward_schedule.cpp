#include "gpu_backward_schedule.h"

#include "gpu_row_sum.h"
#include "kernel_abi.h"
#include "knobs.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_gpu_backward(BackwardStages &s, const Target &) {
    // The forward's default block and unroll (knobs.def), for every row length.
    const GpuKnobs knobs;
    const int threads = knobs.threads, unroll = knobs.unroll;
    Var d_out("d_out"), d_thread("d_thread");
    RVar head = s.partial_terms.x, middle = s.partial_terms.y, token = s.partial_terms.z;

    // The inverse RMS of every row, `rows` rows a block (a thread a row, 16 threads a row for its
    // lanes): dx's kernel and the partials' both read it, and the partials' blocks span many
    // rows, so neither can own it. Row blocks on the grid's x (CUDA allows 2^31 - 1 there, 65535
    // on y and z); the last block shifts back (rows computed twice, the same values).
    const int rows = std::max(1, threads / abi::kSumLanes);
    Var t_block("t_block"), t_row("t_row");
    Expr tokens = s.dx.output_buffer().dim(3).extent();
    s.inv_rms.compute_root()
        .split(s.t, t_block, t_row, clamp(tokens, 1, rows), TailStrategy::ShiftInwards)
        .reorder(t_row, t_block, s.h, s.a)
        .gpu_blocks(t_block, s.h, s.a)
        .gpu_threads(t_row);
    schedule_gpu_row_sum(s.sum_squares, s.sum_squares_lanes, s.sum_squares_blocks, unroll, LoopLevel(s.inv_rms, t_block),
                         {s.lane, s.t}, {s.t});

    // dx: a block a dx row, its threads across the row; the row's mean of g * n, from its sum of
    // g * x (K rows of it under singleton-head broadcasting, one after another) added by the
    // algorithm's 16 lanes first. The K rows' sum of each element stays in a register.
    s.dx.split(s.d, d_out, d_thread, threads, TailStrategy::GuardWithIf)
        .reorder(d_thread, d_out, s.t, s.h, s.a)
        .gpu_blocks(s.t, s.h, s.a)
        .gpu_threads(d_thread);
    s.mean_gn.compute_at(s.dx, s.t);
    // Rows of inv = 0 only (the algorithm's select skips the others), by one thread.
    s.nonfinite_terms.compute_at(s.dx, s.t);
    schedule_gpu_row_sum(s.sum_gx, s.sum_gx_lanes, s.sum_gx_blocks, unroll, LoopLevel(s.dx, s.t), {s.lane}, {});
    s.dx_summed.compute_at(s.dx, d_thread);

    // The partials: a thread a column d of a block of tokens, adding its rows in the CPU's order
    // (token by token, middle row by middle row, head by head), so a block's sum is a serial
    // FP32 chain; neighbouring threads read neighbouring elements of each row.
    const auto over_columns = [&](Stage stage) {
        stage.split(s.d, d_out, d_thread, threads, TailStrategy::GuardWithIf).gpu_blocks(s.blk, d_out, s.h).gpu_threads(d_thread);
    };
    s.partials.compute_root();
    over_columns(s.partials.reorder(s.d, s.blk, s.h));
    over_columns(s.partials.update().reorder(head, middle, token, s.d, s.blk, s.h));
}

}  // namespace magi2norm::schedules
