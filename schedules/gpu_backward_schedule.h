// The backward's GPU schedule (CUDA, OpenCL): a kernel for the rows' inverse RMS, one for dx
// (a thread block a dx row), and the weight gradient's partials (a thread a column of a block).
#pragma once

#include "backward_stages.h"

namespace magi2norm::schedules {

void schedule_gpu_backward(BackwardStages &stages, const Halide::Target &target);

}  // namespace magi2norm::schedules
