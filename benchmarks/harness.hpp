// The body every benchmark shares: prepare the implementation on the case's workspace, warm it
// up and check its output, time calls rotating through the buffer pairs, set the counters.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>

#include "cases.hpp"
#include "implementation.hpp"

namespace magi2norm::bench {

void run_benchmark(benchmark::State &state, const Case &c, const Implementation &impl);

// Calls that follow `idle` without calls (a host between steps): each iteration sleeps, then
// times one call (manual time), then the next calls back to back, the steady state. Counters:
// steady_us, the steady calls' mean, and rate_of_steady, the rate after idle as a fraction of
// the steady rate.
void run_after_idle_benchmark(benchmark::State &state, const Case &c, const Implementation &impl,
                              std::chrono::microseconds idle);

}  // namespace magi2norm::bench
