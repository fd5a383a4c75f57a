// The body every benchmark shares: prepare the implementation on the case's workspace, warm it
// up and check its output, time calls rotating through the buffer pairs, set the counters.
#pragma once

#include <benchmark/benchmark.h>

#include "cases.hpp"
#include "implementation.hpp"

namespace magi2norm::bench {

void run_benchmark(benchmark::State &state, const Case &c, const Implementation &impl);

}  // namespace magi2norm::bench
