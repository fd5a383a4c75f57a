#include "gpu_schedule.h"

#include "gpu_row_sum.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_gpu(NormStages &s, const GpuKnobs &knobs, const Target &) {
    // The training form's inverse RMS reads its own copies of the row sum and inverse RMS (below),
    // cloned before any of the output's directives apply to them.
    Func inv, sum;
    if (s.inverse_rms.defined()) {
        inv = s.inv_rms.clone_in(s.inverse_rms);
        sum = s.sum_squares.clone_in(inv);
    }
    const int threads = knobs.threads;
    const int rows = knobs.rows_per_block;
    // Halide emits vector loads only where it can prove 16-byte alignment, which arbitrary
    // strides do not give; one element per thread per step coalesces fully.
    const int vec = knobs.vector_width;
    // A GPU thread issues in order: unrolled steps put several loads in flight per thread.
    const int unroll = knobs.unroll;

    // Short rows (up to 4 steps of threads / rows threads) share a block, one warp a row by
    // default, so D = 128 keeps a 256-thread block busy; longer rows get a block each. One loop
    // nest with run-time split factors serves both, so the reductions are placed once.
    const int short_row_threads = std::max(1, threads / rows);
    Expr tokens = s.output.output_buffer().dim(3).extent();
    Expr short_row = s.dim <= short_row_threads * vec * 4 && tokens >= rows;
    Expr row_threads = select(short_row, short_row_threads, threads);
    Expr rows_per_block = select(short_row, rows, 1);

    // Token blocks on the grid's x (CUDA allows 2^31 - 1 there, 65535 on y and z); threads over
    // (d, token in block). On the fast path each thread touches `vec` consecutive elements per
    // step, guarded per vector (OpenCL C has no lane-wise predication).
    Var t_block("t_block"), t_row("t_row"), d_out("d_out"), d_chunk("d_chunk"), d_thread("d_thread"), d_vec("d_vec");
    Var d_step("d_step"), d_unrolled("d_unrolled");
    Expr wide = s.dim % vec == 0 && s.x_inner_stride == 1 && s.out_inner_stride == 1;
    // The last token block shifts back (a few rows computed twice, same values), so every block
    // has exactly rows_per_block rows, which sizes its threads and shared memory.
    s.output.split(s.t, t_block, t_row, rows_per_block, TailStrategy::ShiftInwards);
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

    // Each thread sums its share of its row (on the fast path the elements it later writes, so
    // the second read hits L1) in a register; the shares meet in shared memory.
    if (s.sum_steps != 1) throw CompileError("the GPU schedule reduces single squares: generate GPU variants with sum_steps=1");
    schedule_gpu_row_sum(s.sum_squares, s.blocks, row_threads, vec, unroll, LoopLevel(s.output, t_block), s.t);

    // The training form's inverse RMS: a kernel of its own over the same token blocks, whose
    // copies of the row sum and inverse RMS reduce as the output's do (same threads, steps and
    // order: the same bits). GPU loops cannot fuse across two outputs' kernels; the second read
    // of each row is the price.
    if (s.inverse_rms.defined()) {
        s.inverse_rms.split(s.t, t_block, t_row, rows_per_block, TailStrategy::ShiftInwards)
            .reorder(t_row, t_block, s.h, s.a)
            .gpu_blocks(t_block, s.h, s.a)
            .gpu_threads(t_row);
        inv.compute_at(s.inverse_rms, t_block);
        sum.compute_at(s.inverse_rms, t_block);
        schedule_gpu_row_sum(sum, s.blocks, row_threads, vec, unroll, LoopLevel(s.inverse_rms, t_block), s.t);
    }
}

}  // namespace magi2norm::schedules
