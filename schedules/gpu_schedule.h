// The GPU schedule of the norm (CUDA, OpenCL): long rows get a thread block each, short rows
// share one; threads across the normalized axis, the sum of squares reduced inside the block.
#pragma once

#include "knobs.h"
#include "norm_stages.h"

namespace magi2norm::schedules {

void schedule_gpu(NormStages &stages, const GpuKnobs &knobs, const Halide::Target &target);

}  // namespace magi2norm::schedules
