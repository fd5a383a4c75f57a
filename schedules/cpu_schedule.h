// The CPU schedule of the norm: tokens spread over threads in tasks, each row reduced with
// vector accumulators and written with vector stores.
#pragma once

#include "knobs.h"
#include "norm_stages.h"

namespace magi2norm::schedules {

// `from_memory_only`: the variant for calls from memory (streaming stores), which takes the
// prefetching path for every contiguous call; the runtime picks it by the call's size.
void schedule_cpu(NormStages &stages, const CpuKnobs &knobs, bool from_memory_only, const Halide::Target &target);

}  // namespace magi2norm::schedules
