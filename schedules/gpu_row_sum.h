// The GPU's schedule of a row sum (generators/norm_pieces.h, row_sums), shared by the forward's
// and the backward's GPU schedules.
#pragma once

#include <vector>

#include "Halide.h"

namespace magi2norm::schedules {

// Places `sum` and its `lane_sums` (an update over `blocks`) at `at`, a loop of a thread block:
// one thread a lane (`lane_threads`: the lane variable, then the row variables that are thread
// loops there), which adds its FP64 partials block by block, in the algorithm's order, with
// `unroll` blocks' loads in flight; then `sum_threads` (the row variables, or none: one thread)
// add each row's 16 lanes as the algorithm's tree.
void schedule_gpu_row_sum(Halide::Func sum, Halide::Func lane_sums, const Halide::RDom &blocks, int unroll,
                          const Halide::LoopLevel &at, const std::vector<Halide::VarOrRVar> &lane_threads,
                          const std::vector<Halide::VarOrRVar> &sum_threads);

}  // namespace magi2norm::schedules
