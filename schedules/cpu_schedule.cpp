#include "cpu_schedule.h"

#include <functional>

namespace magi2norm::schedules {

using namespace Halide;

namespace {

using OverTasks = std::function<void(Stage, int, TailStrategy, bool)>;

// The paired-word form: rows of whole 8-word vectors with unit strides, so no strided path and
// no tail. It prefetches as the element form does (below).
void schedule_paired_words(NormStages &s, const CpuKnobs &knobs, bool from_memory_only, const OverTasks &over_tasks,
                           const Var &t_in, const Expr &bytes, const Expr &one_task) {
    const int vec = NormStages::kWordsPerVector;
    const auto rows = [&](Stage stage, int task_bytes, TailStrategy last_task, bool prefetch, bool parallel) {
        over_tasks(stage, task_bytes, last_task, parallel);
        // RoundUp: rows are whole vectors, so d % 8 and d / 8 simplify to lanes and vector index.
        stage.vectorize(s.d, vec, TailStrategy::RoundUp);
        if (prefetch) stage.prefetch(s.input, s.d, t_in, 1, PrefetchBoundStrategy::NonFaulting);
    };
    if (from_memory_only) {
        rows(s.output, knobs.memory_task_bytes, TailStrategy::ShiftInwards, true, true);
    } else {
        rows(s.output.specialize(bytes >= knobs.prefetch_bytes), knobs.memory_task_bytes, TailStrategy::ShiftInwards, true, true);
        rows(s.output.specialize(one_task), knobs.task_bytes, TailStrategy::GuardWithIf, false, false);
        rows(s.output, knobs.task_bytes, TailStrategy::GuardWithIf, false, true);
    }
    // Both parities inside the loop over blocks: each word is loaded once and decoded twice
    // (blocks innermost made one pass per parity, loading every word twice).
    s.lane_sums.compute_at(s.sum_squares, s.h).vectorize(s.lane).unroll(s.odd);
    s.lane_sums.update().reorder(s.lane, s.odd, s.blocks).vectorize(s.lane).unroll(s.odd);
}

}  // namespace

void schedule_cpu(NormStages &s, const CpuKnobs &knobs, bool from_memory_only, const Target &target) {
    // The training form's inverse RMS reads its own copies of the row's stages (scheduled last),
    // cloned before any directive of the output's applies to them.
    Func inv, sum, lanes;
    if (s.inverse_rms.defined()) {
        inv = s.inv_rms.clone_in(s.inverse_rms);
        sum = s.sum_squares.clone_in(inv);
        lanes = s.lane_sums.clone_in(sum);
    }
    // One natural vector of the output type per step: one full store (16 lanes of a 16-bit
    // output on AVX2, 8 of FP32).
    const Halide::Type out_type = s.out_bytes == 2 ? UInt(16) : Float(32);
    const int vec = knobs.vector_width > 0 ? knobs.vector_width : target.natural_vector_size(out_type);

    if (s.one_row) {
        // One row (a decode step's call): no tasks, chunks or strides to size, so no integer
        // division before the loops; its lane sums and inverse RMS are on the stack.
        s.inv_rms.compute_at(s.output, Var::outermost());
        s.lane_sums.compute_at(s.output, Var::outermost()).vectorize(s.lane);
        s.lane_sums.update().vectorize(s.lane);
        s.output.specialize(s.dim >= vec).vectorize(s.d, vec, TailStrategy::ShiftInwards);
        return;
    }

    // Tokens are independent: tasks of tokens go to threads. The loops over (h, a, t) are not
    // fused: fused, bounds inference sized the per-row scalars for every head.
    Var task("task"), t_in("t_in"), h_chunk("h_chunk"), h_row("h_row");
    Expr row_bytes = s.dim * s.in_bytes;
    Expr heads = s.output.output_buffer().dim(1).extent();
    Expr token_bytes = max(1, row_bytes * heads * s.output.output_buffer().dim(2).extent());
    // As many tasks as task_bytes asks for, the tokens spread evenly over them. Bytes in 64 bits:
    // a [90000, 12288] BF16 call wraps 32.
    Expr tokens = s.output.output_buffer().dim(3).extent();
    Expr bytes = cast<int64_t>(tokens) * cast<int64_t>(token_bytes);
    // From split_bytes on, a call of two or more tokens gets two tasks even when one would do;
    // below it the hand-off to the second thread costs more than it saves.
    Expr fewest_tasks = select(tokens > 1 && bytes >= knobs.split_bytes, cast<int64_t>(2), cast<int64_t>(1));
    const auto tokens_per_task = [&](int task_bytes) {
        Expr tasks = clamp((bytes + task_bytes - 1) / task_bytes, fewest_tasks, cast<int64_t>(max(tokens, 1)));
        return max(1, cast<int>((cast<int64_t>(tokens) + tasks - 1) / tasks));
    };
    // A token's rows in chunks of chunk_bytes (at least one row); the last chunk shifts back.
    Expr rows_per_chunk = clamp(knobs.chunk_bytes / max(1, row_bytes), 1, max(heads, 1));
    const auto over_tasks = [&](Stage stage, int task_bytes, TailStrategy last_task, bool parallel) {
        stage.split(s.t, task, t_in, tokens_per_task(task_bytes), last_task);
        if (parallel) stage.parallel(task);
        stage.split(s.h, h_chunk, h_row, rows_per_chunk, TailStrategy::ShiftInwards);
    };
    // Calls of one task run on the calling thread with no parallel loop: no closure to pack and
    // unpack.
    Expr one_task = tokens_per_task(knobs.task_bytes) >= tokens;

    // Per-token and per-row scalars in registers.
    s.modality.compute_at(s.output, t_in);
    s.inv_rms.compute_at(s.output, h_row);
    // A chunk's sums of squares come before its outputs, so each row's sqrt and divides (about
    // 45 cycles of dependent latency) overlap the previous row's output instead of stalling it.
    // Stored once per task, one double a row.
    s.sum_squares.store_at(s.output, task).compute_at(s.output, h_chunk);

    if (s.paired_words) {
        schedule_paired_words(s, knobs, from_memory_only, over_tasks, t_in, bytes, one_task);
        return;
    }

    // The 16 FP64 lane sums, the same on every path, so a call's FP32 result depends neither on
    // its strides nor on the ISA the multi-target object picks.
    s.lane_sums.compute_at(s.sum_squares, s.h);

    // Fast path: unit inner strides and at least one full vector per row; ShiftInwards recomputes
    // a few elements of the last vector instead of a scalar tail.
    Expr contiguous = s.x_inner_stride == 1 && s.out_inner_stride == 1 && s.dim >= vec;
    // Calls from memory prefetch the next token's row while they write this one, so reads overlap
    // writes. Halide emits prefetchnta, which slows calls whose input is in cache: hence the size
    // threshold. Their tasks are larger (a task's first row has no prefetch), and their last task
    // shifts back: under a guarded tail Halide drops the prefetch's token offset.
    Stage from_memory = s.output.specialize(from_memory_only ? contiguous : contiguous && bytes >= knobs.prefetch_bytes);
    over_tasks(from_memory, knobs.memory_task_bytes, TailStrategy::ShiftInwards, true);
    if (s.in_bytes < s.out_bytes) {
        // FP32 outputs of 16-bit inputs prefetch at the loop over vectors of an explicit split:
        // at the vectorized d the prefetch address carries the shifted-inwards index (5 of 14
        // instructions per 8 outputs). The second split of `lanes` is what moves the address out.
        Var vectors("vectors"), lanes("lanes");
        from_memory.split(s.d, vectors, lanes, vec, TailStrategy::ShiftInwards)
            .vectorize(lanes, vec)
            .prefetch(s.input, vectors, t_in, 1, PrefetchBoundStrategy::NonFaulting);
    } else {
        from_memory.vectorize(s.d, vec, TailStrategy::ShiftInwards)
            .prefetch(s.input, s.d, t_in, 1, PrefetchBoundStrategy::NonFaulting);
    }
    // Every other call guards its last task, which computes no row twice.
    if (!from_memory_only) {
        Stage serial = s.output.specialize(one_task);
        over_tasks(serial, knobs.task_bytes, TailStrategy::GuardWithIf, false);
        serial.specialize(contiguous).vectorize(s.d, vec, TailStrategy::ShiftInwards);
    }
    over_tasks(s.output, knobs.task_bytes, TailStrategy::GuardWithIf, true);
    // With from_memory_only the condition is the one above; Halide would vectorize it twice.
    if (!from_memory_only) s.output.specialize(contiguous).vectorize(s.d, vec, TailStrategy::ShiftInwards);
    s.lane_sums.vectorize(s.lane);
    s.lane_sums.update().specialize(s.x_inner_stride == 1).vectorize(s.lane);

    // The training form's inverse RMS: a loop nest of its own over copies of the row sums,
    // scheduled as the output's (the same lanes and tree: the same bits). Fused into the output's
    // loops (compute_with) it wrote no row twice, but Halide then left the lane sums' boundary
    // test in every block (gathers, 2.5-4x the element form's time); a second pass over x costs
    // less.
    if (s.inverse_rms.defined()) {
        over_tasks(s.inverse_rms, knobs.task_bytes, TailStrategy::GuardWithIf, true);
        sum.store_at(s.inverse_rms, task).compute_at(s.inverse_rms, h_chunk);
        lanes.compute_at(sum, s.h).vectorize(s.lane);
        lanes.update().specialize(s.x_inner_stride == 1).vectorize(s.lane);
    }
}

}  // namespace magi2norm::schedules
