#include "cpu_schedule.h"

#include <functional>

namespace magi2norm::schedules {

using namespace Halide;

namespace {

using OverTasks = std::function<void(Stage, int, TailStrategy)>;

// The paired-word form (NormStages::paired_words): rows of whole 8-word vectors with unit
// strides, so there is no strided path and no tail. As the element form, it prefetches the
// next row from `prefetch_bytes` on (or always, in the streaming variants), with tasks of
// `memory_task_bytes` there.
void schedule_paired_words(NormStages &s, const CpuScheduleParams &params, const OverTasks &over_tasks, const Var &t_in,
                           const Expr &bytes) {
    const int vec = NormStages::kWordsPerVector;
    const auto rows = [&](Stage stage, int task_bytes, TailStrategy last_task, bool prefetch) {
        over_tasks(stage, task_bytes, last_task);
        // RoundUp: rows are whole vectors (the generator requires it), and d % 8 and d / 8 of
        // the definition then simplify to the vector's lanes and its index.
        stage.vectorize(s.d, vec, TailStrategy::RoundUp);
        if (prefetch) stage.prefetch(s.input, s.d, t_in, 1, PrefetchBoundStrategy::NonFaulting);
    };
    if (params.from_memory_only) {
        rows(s.output, params.memory_task_bytes, TailStrategy::ShiftInwards, true);
    } else {
        rows(s.output.specialize(bytes >= params.prefetch_bytes), params.memory_task_bytes, TailStrategy::ShiftInwards, true);
        rows(s.output, params.task_bytes, TailStrategy::GuardWithIf, false);
    }
    // Lanes (lane pair, odd) = position mod 16, as the element form's 16 lanes: one FP64 vector of 8
    // lane pairs per parity. Both parities inside the loop over blocks: each word is loaded once and
    // decoded twice (shift, mask), where the default order (blocks innermost) made one pass over the
    // row per parity, every word loaded twice (per 64 elements 39 instructions and 4 loads instead of
    // 42 and 8, checked in the assembly; same additions, same bits). Same binary, new / old time
    // (NOTES.md, stop 20): in cache, one thread, [64, 3072] 0.95-0.96 and [16, 12288] 0.94-0.95; from
    // memory, 2 threads, streaming: [4096, 3072] 0.93-0.99, [2048, 12288] 0.96-0.99.
    s.lane_sums.compute_at(s.sum_squares, s.h).vectorize(s.lane).unroll(s.odd);
    s.lane_sums.update().reorder(s.lane, s.odd, s.blocks).vectorize(s.lane).unroll(s.odd);
}

}  // namespace

void schedule_cpu(NormStages &s, const CpuScheduleParams &params, const Target &target) {
    // One natural vector of the output type per step: 16 lanes on AVX2 for a 16-bit output (one
    // full 32-byte store), 8 for FP32. Measured in cache, one thread, D = 3072 (NOTES.md):
    // bf16 -> bf16 0.45 ns/element with 16 lanes vs 0.52 with 8; bf16 -> f32 0.30 with 8 vs 0.33.
    const Halide::Type out_type = s.out_bytes == 2 ? UInt(16) : Float(32);
    const int vec = params.vector_width > 0 ? params.vector_width : target.natural_vector_size(out_type);

    // Tokens are independent: hand out batches of tokens to threads. A batch of ~64 KiB of
    // input amortizes the task overhead for small rows (the Q/K norm's 24 x 128) while leaving
    // enough tasks to balance. The loops are not fused: fusing (h, a, t) into one row loop
    // made bounds inference size the per-row scalars for every head (an allocation per row).
    Var task("task"), t_in("t_in"), h_chunk("h_chunk"), h_row("h_row");
    Expr row_bytes = s.dim * s.in_bytes;
    Expr heads = s.output.output_buffer().dim(1).extent();
    Expr token_bytes = max(1, row_bytes * heads * s.output.output_buffer().dim(2).extent());
    // As many tasks as `task_bytes` asks for, with the tokens spread evenly over them: 16
    // pre-norm tokens (96 KiB) make two tasks of 8, not one of 10 and one of 6. The bytes are
    // counted in 64 bits: in 32, [90000, 12288] BF16 (2.2 GB) wrapped to one task on one thread.
    Expr tokens = s.output.output_buffer().dim(3).extent();
    Expr bytes = cast<int64_t>(tokens) * cast<int64_t>(token_bytes);
    // A call of one task's worth but at least `split_bytes` still gets two: [16, 1536] BF16
    // took 11.9-12.6 us as one task and 7.0-9.7 as two, f32 [16, 768] 5.3-5.9 and 3.2-4.9;
    // below ~32 KiB ([16, 768] BF16) the hand-off to the second thread eats the gain.
    Expr fewest_tasks = select(tokens > 1 && bytes >= params.split_bytes, cast<int64_t>(2), cast<int64_t>(1));
    const auto tokens_per_task = [&](int task_bytes) {
        Expr tasks = clamp((bytes + task_bytes - 1) / task_bytes, fewest_tasks, cast<int64_t>(max(tokens, 1)));
        // In 64 bits: tokens + tasks - 1 passes int32 for up to 2^31 - 1 tokens.
        return max(1, cast<int>((cast<int64_t>(tokens) + tasks - 1) / tasks));
    };
    // A token's rows in chunks (see sum_squares below). The last chunk shifts back over the one
    // before it (a chunk never has more rows than the token).
    Expr rows_per_chunk = clamp(params.chunk_bytes / max(1, row_bytes), 1, max(heads, 1));
    const auto over_tasks = [&](Stage stage, int task_bytes, TailStrategy last_task) {
        stage.split(s.t, task, t_in, tokens_per_task(task_bytes), last_task).parallel(task);
        stage.split(s.h, h_chunk, h_row, rows_per_chunk, TailStrategy::ShiftInwards);
    };

    // Per-token and per-row scalars in registers: the modality is a few compares per token,
    // the inverse RMS one divide, one sqrt and one divide per row.
    s.modality.compute_at(s.output, t_in);
    s.inv_rms.compute_at(s.output, h_row);
    // The sums of squares of a chunk of a token's rows come first, then the chunk's outputs: a
    // row's divides and sqrt (about 45 cycles of dependent latency, which perf put at a quarter of
    // the Q/K norm's samples) then depend on a sum finished a whole pass earlier, so they overlap
    // the previous row's output instead of stalling it. A chunk is as many rows as fit in
    // `chunk_bytes` of input (at least one): the Q/K norm's 24 heads of 128 make one chunk, rows of
    // 3072 one or two. Same binary, streaming variants, new / old time (NOTES.md, stop 18): whole
    // tokens against one row at a time, [T, 24, 128] bf16 -> f32 0.88-0.92 from memory (T = 4096,
    // 2 threads), 0.86-0.87 in cache (T = 64, one thread); bf16 -> bf16 (paired) 0.78-0.85 and
    // 0.82-0.88; one row per token (D = 128, 3072, 12288) 0.93-1.08, noise. And (stop 19) chunks of
    // 16 KiB against whole tokens, [4096, 4, 3072] from memory: f32 0.91-0.92, bf16 -> f32
    // 0.90-0.93, bf16 -> bf16 (paired) 0.94-1.04; in cache (T = 16, one thread) f32 0.86-0.90, bf16
    // -> f32 0.99-1.02, Q/K unchanged. Whole tokens of many rows had also read them twice from
    // memory (x [T, S, D] with M > 1: the runtime regroups such rows when M = 1). Stored once per
    // task (one double a row); each row's 16 lane sums stay in registers.
    s.sum_squares.store_at(s.output, task).compute_at(s.output, h_chunk);

    if (s.paired_words) {
        schedule_paired_words(s, params, over_tasks, t_in, bytes);
        return;
    }

    // The algorithm's 16 FP64 lane sums (four AVX2 registers), each adding its lane's FP32
    // partial block by block; the algorithm then adds them as a tree. The same on every path,
    // vectorized or not, so the FP32 result of a call does not depend on its strides or on the
    // ISA the multi-target library picks.
    s.lane_sums.compute_at(s.sum_squares, s.h);

    // Fast path: unit inner strides and at least one full vector per row. ShiftInwards
    // re-computes a few elements of the last vector instead of a scalar tail.
    Expr contiguous = s.x_inner_stride == 1 && s.out_inner_stride == 1 && s.dim >= vec;
    // Calls that come from memory: each vector step that writes row t also prefetches the next
    // token's input at the same d, so the next row's reads overlap this row's writes instead of
    // every row being a read phase (the sum of squares) then a write phase. Same-process A/B,
    // T = 4096, 2 threads (NOTES.md): pre-norm 0.64-0.67 -> 0.76 of the copy, mHC -> bf16
    // 0.67-0.71 -> 0.74-0.76, final f32 0.73-0.86 -> 0.76-0.91, bf16 -> f32 and Q/K unchanged.
    // Halide emits prefetchnta, which costs calls whose input sits in cache (pre-norm
    // [256, 3072]: 169-177 -> 198-211 us), hence the size threshold. The streaming-store
    // variants (`from_memory_only`) take this path for every contiguous call: the runtime sends
    // them only calls with large outputs (StreamingPolicy).
    // Its last task shifts back over the one before it (recomputing fewer than `tokens_per_task`
    // rows, with the same values): under a guarded tail Halide drops the prefetch's token offset
    // and prefetches the current row.
    // These calls take larger tasks (`memory_task_bytes`, 1 MiB): a task's last row prefetches
    // the next task's first row, which another thread is likely to take, so the first row of
    // every task is read without a prefetch. Same-process A/B, T = 4096, 2 threads, fraction of
    // the copy, 64 KiB -> 1 MiB tasks, two runs (NOTES.md): pre-norm 0.83 -> 0.92, 0.81 ->
    // 0.83; mHC -> bf16 (2.7 rows a task before) 0.73 -> 0.82, 0.74 -> 0.82; mHC -> f32 0.88
    // -> 0.91, 0.75 -> 0.85; final f32 0.92 -> 1.00, 0.93 -> 0.97; Q/K 0.89 -> 0.86, 0.86 -> 0.93.
    Stage from_memory = s.output.specialize(params.from_memory_only ? contiguous : contiguous && bytes >= params.prefetch_bytes);
    over_tasks(from_memory, params.memory_task_bytes, TailStrategy::ShiftInwards);
    // FP32 outputs of 16-bit inputs (the Q/K norm, mHC -> f32) prefetch at the loop over vectors
    // of an explicit split: prefetching at the vectorized d itself addresses each prefetch with
    // the shifted-inwards index, min(8 d, D - 8), which LLVM keeps in the loop (5 of its 14
    // instructions per 8 outputs); at the split's loop the main loop's address is unshifted and
    // the last vector is its own tail (9 instructions). Same binary, streaming, new / old time
    // (NOTES.md, stop 18): Q/K [4096, 24, 128] 0.81-0.93 from memory and 0.85-0.87 in cache (T =
    // 64, one thread); [4096, 12288] 0.91-1.03; [4096, 3072] 0.97-1.00. Not for the rest: F32 ->
    // F32 ran 1.00-1.10x the time from memory with it (0.91 in cache), as did rows of 12288 with
    // one prefetch per 64-byte line instead of per vector (1.10-1.12x); a guess, not measured: a
    // faster loop issues the next row's prefetches closer together and more of them are dropped.
    if (s.in_bytes < s.out_bytes) {
        // `vectorize(lanes, vec)` splits `lanes` (extent vec) once more, and that is what moves
        // the prefetch's address out of the shift: with `vectorize(lanes)` the loop was the
        // 14-instruction one again (checked in the assembly).
        Var vectors("vectors"), lanes("lanes");
        from_memory.split(s.d, vectors, lanes, vec, TailStrategy::ShiftInwards)
            .vectorize(lanes, vec)
            .prefetch(s.input, vectors, t_in, 1, PrefetchBoundStrategy::NonFaulting);
    } else {
        from_memory.vectorize(s.d, vec, TailStrategy::ShiftInwards)
            .prefetch(s.input, s.d, t_in, 1, PrefetchBoundStrategy::NonFaulting);
    }
    // Every other call guards its last task instead, which computes no row twice: shifted, 16
    // tokens of the mHC width made 6 tasks of 3 rows, 18 rows of work.
    over_tasks(s.output, params.task_bytes, TailStrategy::GuardWithIf);
    // With `from_memory_only` that condition is the one above, and Halide would hand back the
    // same specialization and vectorize it twice (64-lane gathers, checked in the statements).
    if (!params.from_memory_only) s.output.specialize(contiguous).vectorize(s.d, vec, TailStrategy::ShiftInwards);
    s.lane_sums.vectorize(s.lane);
    s.lane_sums.update().specialize(s.x_inner_stride == 1).vectorize(s.lane);
}

}  // namespace magi2norm::schedules
