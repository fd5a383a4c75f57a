// The CPU pools alone: a loop of equal tasks, each a fixed amount of arithmetic, on two threads of
// the library's pool (what every CPU call without a host loop runs on) and of Halide's (its
// fallback, and what the library ran on before it had its own). "pool/<pool>/tasks<N>/work<ns>":
// N tasks of about <ns> nanoseconds each, as a tiny call's (T = 16: 2 tasks of about 4 us) and a
// small one's are split. Counters: serial_us, the same tasks run on the caller alone in the same
// benchmark, and speedup, serial_us over the loop's time; 2 is two threads without overhead.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "HalideRuntime.h"
#include "magi2norm/internal.hpp"
#include "pool_dispatch.hpp"

namespace magi2norm::bench {

namespace {

constexpr int kThreads = 2;

// A dependent chain of integer multiply-adds: a fixed amount of work that touches no memory.
std::uint64_t spin_work(std::uint64_t steps) {
    std::uint64_t v = steps;
    for (std::uint64_t i = 0; i < steps; ++i) v = v * 6364136223846793005ull + 1442695040888963407ull;
    return v;
}

std::uint64_t steps_per_task;  // set per benchmark, before any task runs
volatile std::uint64_t sink;

int library_task(void *, int) {
    sink = spin_work(steps_per_task);
    return 0;
}
int halide_task(void *, int, std::uint8_t *) {
    sink = spin_work(steps_per_task);
    return 0;
}

// Steps of spin_work that take about `ns` on this machine.
std::uint64_t steps_for(int ns) {
    using Clock = std::chrono::steady_clock;
    constexpr std::uint64_t kProbe = 1 << 20;
    const Clock::time_point start = Clock::now();
    sink = spin_work(kProbe);
    const double probe_ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    return static_cast<std::uint64_t>(static_cast<double>(kProbe) * ns / probe_ns) + 1;
}

// The tasks run one after another on the caller: the median of 11 runs, in microseconds.
double serial_us(int tasks) {
    std::vector<double> runs;
    for (int run = 0; run < 11; ++run) {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < tasks; ++i) library_task(nullptr, i);
        runs.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(runs.begin(), runs.begin() + 5, runs.end());
    return runs[5];
}

void run_pool(benchmark::State &state, bool library, int tasks, int ns) {
    steps_per_task = steps_for(ns);
    const double serial = serial_us(tasks);
    for (auto _ : state) {
        if (library) {
            if (!detail::try_run_on_pool(kThreads, tasks, library_task, nullptr)) state.SkipWithError("the library's pool is in use");
        } else {
            halide_default_do_par_for(nullptr, halide_task, 0, tasks, nullptr);
        }
    }
    state.counters["serial_us"] = serial;
    state.counters["speedup"] = benchmark::Counter(serial * 1e-6 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    // Halide's pool runs on all the threads it holds (the machine's count unless set lower).
    state.counters["compute_threads"] = library ? kThreads : halide_get_num_threads();
}

}  // namespace

void register_pool_benchmarks() {
    for (const bool library : {true, false}) {
        for (const auto &[tasks, ns] : {std::pair{2, 4000}, std::pair{2, 1000}, std::pair{6, 2000}, std::pair{24, 2000}}) {
            const std::string name = std::string("pool/") + (library ? "library" : "halide") + "/tasks" + std::to_string(tasks) +
                                     "/work" + std::to_string(ns);
            benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State &state) { run_pool(state, library, tasks, ns); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
        }
    }
}

}  // namespace magi2norm::bench
