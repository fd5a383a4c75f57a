// The GPU schedule of the norm (CUDA, OpenCL): long rows get a thread block each, short rows
// share one; threads across the normalized axis, the sum of squares reduced inside the block.
// Its knobs are generator parameters (see generators/magi2_norm_generator.cpp) so an autotuner
// can search them.
#pragma once

#include "norm_stages.h"

namespace magi2norm::schedules {

struct GpuScheduleParams {
    // Threads per block; 0 = 256.
    int threads = 0;
    // Rows per block when rows are short (threads / rows threads per row); 0 = 8.
    int rows_per_block = 0;
    // Consecutive elements per thread per step (wide loads); 0 = 1.
    int vector_width = 0;
    // Steps of a thread's loops over its row unrolled together (loads in flight per thread);
    // 0 = 4.
    int unroll = 0;
};

void schedule_gpu(NormStages &stages, const GpuScheduleParams &params, const Halide::Target &target);

}  // namespace magi2norm::schedules
