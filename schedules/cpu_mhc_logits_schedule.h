// The CPU schedule of the mHC logits: tokens spread over threads in tasks; per token its row
// sums and its normalized row in vectors, then the product with phi over vectors of columns.
#pragma once

#include "mhc_logits_stages.h"

namespace magi2norm::schedules {

void schedule_cpu_mhc_logits(MhcLogitsStages &stages, const Halide::Target &target);

}  // namespace magi2norm::schedules
