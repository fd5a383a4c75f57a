#include "gpu_schedule.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_gpu(NormStages &s, const GpuScheduleParams &params, const Target &) {
    const int threads = params.threads > 0 ? params.threads : 256;
    const int rows = params.rows_per_block > 0 ? params.rows_per_block : 8;
    // Halide emits PTX vector loads only where it can prove 16-byte alignment, which arbitrary
    // strides do not give; scalar loads with consecutive threads on consecutive elements
    // (vec = 1) coalesce fully, so that is the default until aligned fast paths exist.
    const int vec = params.vector_width > 0 ? params.vector_width : 1;
    // Steps of a thread's loops over its row unrolled together. A GPU thread issues in order, so
    // a step whose arithmetic needs its own load waits out the memory latency before the next
    // load issues: one load in flight per thread, a third or so of what an SM needs to cover the
    // latency of HBM (Little's law: ~20-30 KB in flight per SM). Unrolled steps issue their loads
    // together. Not yet measured on a GPU: scripts/gpu_check.sh compares it with gpu_unroll=1.
    const int unroll = params.unroll > 0 ? params.unroll : 4;

    // Short rows (up to 4 steps of `threads / rows` threads: D <= 128 by default, the Q/K
    // norm's width) share a block: `rows` rows of `threads / rows` threads each, one warp per
    // row, so D = 128 keeps every thread of a 256-thread block busy instead of half of one.
    // Longer rows get a block each, all `threads` across the row. Both shapes are one loop nest
    // with run-time split factors, so the reductions below are placed once for both.
    const int short_row_threads = std::max(1, threads / rows);
    Expr tokens = s.output.output_buffer().dim(3).extent();
    Expr short_row = s.dim <= short_row_threads * vec * 4 && tokens >= rows;
    Expr row_threads = select(short_row, short_row_threads, threads);
    Expr rows_per_block = select(short_row, rows, 1);

    // Blocks over (token blocks, h, a): the token blocks on the grid's x, which CUDA allows up to
    // 2^31 - 1 blocks (y and z: 65535), so [65536, 3072] and the rows the runtime regroups into
    // tokens (layout.hpp, fold_rows) launch; threads over (d, token in block). On the fast path (unit
    // strides, D a multiple of vec) each thread touches `vec` consecutive elements per step, so
    // loads and stores are wide and a warp reads contiguous memory; the guard for the row's end
    // is per vector, so no lane-wise predication is needed (OpenCL C has none).
    Var t_block("t_block"), t_row("t_row"), d_out("d_out"), d_chunk("d_chunk"), d_thread("d_thread"), d_vec("d_vec");
    Var d_step("d_step"), d_unrolled("d_unrolled");
    Expr wide = s.dim % vec == 0 && s.x_inner_stride == 1 && s.out_inner_stride == 1;
    // The last token block shifts back to end at the last token (recomputing a few rows, with
    // the same values) rather than running short: every block then has exactly
    // `rows_per_block` rows, which is what sizes the block's threads and shared memory. With
    // fewer tokens than that, rows take the long-row layout.
    s.output.split(s.t, t_block, t_row, rows_per_block, TailStrategy::ShiftInwards);
    // What both paths share once their d loops are split: the grid, the threads, the unrolled steps.
    const auto over_blocks = [&](Stage stage) {
        stage.gpu_blocks(t_block, s.h, s.a)
            .gpu_threads(d_thread, t_row)
            .split(d_out, d_step, d_unrolled, unroll, TailStrategy::GuardWithIf)
            .unroll(d_unrolled);
    };
    over_blocks(s.output.specialize(wide)
                    .split(s.d, d_chunk, d_vec, vec, TailStrategy::RoundUp)
                    .split(d_chunk, d_out, d_thread, row_threads, TailStrategy::GuardWithIf)
                    .reorder(d_vec, d_thread, d_out, t_row, t_block, s.h, s.a)
                    .vectorize(d_vec));
    over_blocks(s.output.split(s.d, d_out, d_thread, row_threads, TailStrategy::GuardWithIf)
                    .reorder(d_thread, d_out, t_row, t_block, s.h, s.a));

    // Per-row values of a block live in shared memory.
    s.modality.compute_at(s.output, t_block);
    s.inv_rms.compute_at(s.output, t_block);
    s.sum_squares.compute_at(s.output, t_block);

    // Each thread accumulates its share of its row (on the fast path the same elements it later
    // writes, so the second read hits L1) in one register. A row's partial sums then meet in
    // shared memory in two steps: groups of `kGroup` threads add theirs in parallel, then one
    // thread adds the group sums, so the serial chain is threads / kGroup + kGroup adds (32
    // for 256 threads) instead of `threads`.
    constexpr int kGroup = 16;
    RVar ro("ro"), ri("ri"), r_thread("r_thread"), r_vec("r_vec"), r_group("r_group"), r_member("r_member");
    RVar r_step("r_step"), r_unrolled("r_unrolled");
    Var lane("lane"), group("group");
    // With one square per partial (sum_steps = 1), lane l of block b is element 16 b + l: fused,
    // the two make the normalized axis itself (rounded up to 16; the padding adds zeros).
    if (s.sum_steps != 1) throw CompileError("the GPU schedule reduces single squares: generate GPU variants with sum_steps=1");
    RVar r_d("r_d");
    s.sum_squares.update(0)
        .fuse(s.blocks.x, s.blocks.y, r_d)
        .split(r_d, ro, ri, row_threads * vec, TailStrategy::GuardWithIf)
        .split(ri, r_thread, r_vec, vec);
    Func lanes = s.sum_squares.update(0).rfactor(r_thread, lane);
    lanes.compute_at(s.output, t_block).reorder(lane, s.t).gpu_threads(lane, s.t);
    // Unrolled steps keep their order (ro ascending), so the sums do not change.
    lanes.update()
        .reorder(r_vec, ro, lane, s.t)
        .gpu_threads(lane, s.t)
        .split(ro, r_step, r_unrolled, unroll, TailStrategy::GuardWithIf)
        .unroll(r_unrolled);
    s.sum_squares.update(0).split(r_thread, r_group, r_member, kGroup, TailStrategy::GuardWithIf);
    Func groups = s.sum_squares.update(0).rfactor(r_group, group);
    groups.compute_at(s.output, t_block).reorder(group, s.t).gpu_threads(group, s.t);
    groups.update().reorder(r_member, group, s.t).gpu_threads(group, s.t);
}

}  // namespace magi2norm::schedules
