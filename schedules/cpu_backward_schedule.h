// The CPU schedule of the backward: blocks of tokens spread over threads, each block's partial
// weight gradient fused with its input gradient so that both read the block's rows from cache.
#pragma once

#include "backward_stages.h"

namespace magi2norm::schedules {

void schedule_cpu_backward(BackwardStages &stages, const Halide::Target &target);

}  // namespace magi2norm::schedules
