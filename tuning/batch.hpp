// GPU tuning in three steps, because the GPU machine has no Halide: here the candidates of every
// class are made (prepare_batch: the defaults, each knob's other values one at a time, and
// seeded random configurations, recorded as "pending" with their variants' names); on the GPU
// machine magi2-tune-measure loads them from the cache folder and times them (measure_pending);
// back here select_classes keeps the best of each class. The same steps run on OpenCL (PoCL
// here), where the times mean nothing but the workflow is the one a GPU runs.
#pragma once

#include <string>

#include "compile.hpp"
#include "record.hpp"

namespace magi2norm::tuning {

// The Halide target of a GPU backend's candidates (host code SSE4.1, as the build's GPU
// families): CUDA at the highest capability of the build's (80, 86) that `capability` runs.
std::string gpu_target(Backend backend, int capability);

void prepare_batch(Record &record, Compiler &compiler, Backend backend, int random_per_class);
// Times every pending schedule (`rounds` interleaved rounds each case); prints its progress.
void measure_pending(Record &record, const Compiler &compiler, Backend backend, int rounds);
// Each class's best measured knob schedule: the lowest score that beats the defaults by more
// than the noise and is slower on none of the class's cases.
void select_classes(Record &record);

}  // namespace magi2norm::tuning
