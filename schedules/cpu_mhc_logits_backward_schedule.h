// The CPU schedule of the mHC logits' backward: dy in tasks of tokens, a block of rows of D in
// registers over phi's columns; dphi in tasks of D, each task's sums over every token in order.
#pragma once

#include "mhc_logits_stages.h"

namespace magi2norm::schedules {

void schedule_cpu_mhc_logits_backward(MhcLogitsBackwardStages &stages, const Halide::Target &target);

}  // namespace magi2norm::schedules
