// Wall-clock timing: the best of several runs after a warm-up run (which also takes the page
// faults of freshly allocated buffers out of the measurement).
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>

namespace magi2norm::cli {

template <typename Run>
double best_seconds(int repeats, Run &&run) {
    run();
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < repeats; ++i) {
        const auto start = std::chrono::steady_clock::now();
        run();
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        best = std::min(best, elapsed.count());
    }
    return best;
}

}  // namespace magi2norm::cli
