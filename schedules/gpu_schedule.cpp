#include "gpu_schedule.h"

#include "gpu_row_sum.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_gpu(NormStages &s, const GpuKnobs &knobs, const Target &) {
    // The training form's inverse RMS reads its own copies of the row sum and inverse RMS (below),
    // cloned before any of the output's directives apply to them.
    Func inv, sum, lanes;
    if (s.inverse_rms.defined()) {
        inv = s.inv_rms.clone_in(s.inverse_rms);
        sum = s.sum_squares.clone_in(inv);
        lanes = s.lane_sums.clone_in(sum);
    }
    const int threads = knobs.threads;
    // Halide emits vector loads only where it can prove 16-byte alignment, which arbitrary
    // strides do not give; one element per thread per step coalesces fully.
    const int vec = knobs.vector_width;
    // A GPU thread issues in order: unrolled steps put several loads in flight per thread.
    const int unroll = knobs.unroll;

    // Rows share a block, `rows_per_block` of them (fewer in a call of fewer tokens), each with
    // threads / rows_per_block threads for its output and 16 for its sum: the sum's order is the
    // algorithm's (a thread a lane, its blocks in turn), so a row cannot spread it over more.
    const int rows = std::max(1, std::min(knobs.rows_per_block, threads / abi::kSumLanes));
    const int row_threads = threads / rows;
    Expr tokens = s.output.output_buffer().dim(3).extent();
    Expr rows_per_block = clamp(tokens, 1, rows);

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

    // Per-row values of a block live in shared memory: each row's lane sums, its sum (the lanes'
    // tree, a thread a row), its inverse RMS and its modality.
    s.modality.compute_at(s.output, t_block).gpu_threads(s.t);
    s.inv_rms.compute_at(s.output, t_block).gpu_threads(s.t);
    schedule_gpu_row_sum(s.sum_squares, s.lane_sums, s.blocks, unroll, LoopLevel(s.output, t_block), {s.lane, s.t}, {s.t});

    // The training form's inverse RMS: a kernel of its own over the same token blocks, whose
    // copies of the row sum and inverse RMS reduce as the output's do (same threads, steps and
    // order: the same bits). GPU loops cannot fuse across two outputs' kernels; the second read
    // of each row is the price.
    if (s.inverse_rms.defined()) {
        s.inverse_rms.split(s.t, t_block, t_row, rows_per_block, TailStrategy::ShiftInwards)
            .reorder(t_row, t_block, s.h, s.a)
            .gpu_blocks(t_block, s.h, s.a)
            .gpu_threads(t_row);
        inv.compute_at(s.inverse_rms, t_block).gpu_threads(s.t);
        schedule_gpu_row_sum(sum, lanes, s.blocks, unroll, LoopLevel(s.inverse_rms, t_block), {s.lane, s.t}, {s.t});
    }
}

}  // namespace magi2norm::schedules
