// The GPU's reduction of a row sum (generators/norm_pieces.h, gpu_row_sum) inside a thread
// block, shared by the forward's and the backward's GPU schedules.
#pragma once

#include "Halide.h"

namespace magi2norm::schedules {

// Reduces `sum`(h, a, t), an update over `blocks` = (lane, block), at `at` (a loop of a thread
// block) with `row_threads` threads a row of `rows` (the consumer's thread variable over rows):
// each thread adds its share of the row in steps of `vec` consecutive terms (the steps unrolled
// by `unroll`, in order), the shares meet in shared memory in groups of 16, then the groups.
void schedule_gpu_row_sum(Halide::Func sum, const Halide::RDom &blocks, const Halide::Expr &row_threads, int vec, int unroll,
                          const Halide::LoopLevel &at, const Halide::Var &rows);

}  // namespace magi2norm::schedules
