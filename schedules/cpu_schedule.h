// The CPU schedule of the norm: rows spread over threads, each row reduced with vector
// accumulators and written with vector stores. Its knobs are generator parameters (see
// generators/magi2_norm_generator.cpp) so an autotuner can search them.
#pragma once

#include "norm_stages.h"

namespace magi2norm::schedules {

struct CpuScheduleParams {
    // Lanes per vector step of the row loops; 0 = the target's natural width for the output type.
    int vector_width = 0;
    // Input bytes per parallel task of calls below `prefetch_bytes`: a call makes
    // ceil(its input bytes / task_bytes) tasks (at most one per token), its tokens spread evenly
    // over them.
    int task_bytes = 64 * 1024;
    // Input bytes from which a call of more than one token is split in at least two tasks.
    int split_bytes = 32 * 1024;
    // Input bytes from which a call prefetches the next token's row while writing a row.
    int prefetch_bytes = 4 * 1024 * 1024;
    // Input bytes per parallel task of those calls (the prefetch cannot reach across tasks).
    int memory_task_bytes = 1024 * 1024;
    // Input bytes of a token's rows whose sums of squares are computed before their outputs.
    int chunk_bytes = 16 * 1024;
    // The variant for calls from memory (written with streaming stores): every contiguous call
    // takes the prefetching path, whatever its size (the runtime chose this variant by size).
    bool from_memory_only = false;
};

void schedule_cpu(NormStages &stages, const CpuScheduleParams &params, const Halide::Target &target);

}  // namespace magi2norm::schedules
