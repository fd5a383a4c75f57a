// Wall-clock timing of a repeated run: one untimed run first (it warms the code, the caches and
// the TLB, and takes the page faults of freshly allocated buffers out of the measurement), then
// `runs` timed ones, summarised as the best and the mean.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>

namespace magi2norm::measure {

struct RunTimes {
    double best_seconds = std::numeric_limits<double>::infinity();
    double mean_seconds = std::numeric_limits<double>::infinity();
};

template <typename Run>
RunTimes time_runs(int runs, Run &&run) {
    run();
    RunTimes times;
    double total = 0;
    for (int i = 0; i < runs; ++i) {
        const auto start = std::chrono::steady_clock::now();
        run();
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        times.best_seconds = std::min(times.best_seconds, elapsed.count());
        total += elapsed.count();
    }
    if (runs > 0) times.mean_seconds = total / runs;
    return times;
}

}  // namespace magi2norm::measure
