#include "harness.hpp"

#include <chrono>
#include <exception>
#include <thread>

#include "copy_ceilings.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::bench {

namespace {

// Ceilings for the case's fractions. Cases of ours that stream from memory get ceilings measured
// just before and just after their timed loop, averaged; the rest (cache-resident cases, which
// the ceilings do not bound, and peers, whose fractions the report does not use) the process's.
bool measures_nearby_ceilings(const Workspace &ws, const Implementation &impl) {
    return impl.nearby_ceilings && !ws.cache_resident();
}

measure::CopyCeilings average(const measure::CopyCeilings &a, const measure::CopyCeilings &b) {
    measure::CopyCeilings c = a;
    c.memcpy_bps = (a.memcpy_bps + b.memcpy_bps) / 2;
    c.copy_bps = (a.copy_bps + b.copy_bps) / 2;
    c.streaming_copy_bps = (a.streaming_copy_bps + b.streaming_copy_bps) / 2;
    return c;
}

// Counters of one benchmark. Rates (kIsRate) are divided by the measured real time, so
// frac_* = achieved bytes per second / ceiling.
void set_counters(benchmark::State &state, const Case &c, const Workspace &ws, const Implementation &impl,
                  const measure::CopyCeilings &ceiling) {
    using benchmark::Counter;
    const double bytes = c.bytes_moved() * static_cast<double>(state.iterations());
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes));  // reported as bytes_per_second
    state.counters["bytes"] = c.bytes_moved();
    state.counters["frac_memcpy"] = Counter(bytes / ceiling.memcpy_bps, Counter::kIsRate);
    state.counters["frac_copy"] = Counter(bytes / ceiling.copy_bps, Counter::kIsRate);
    state.counters["frac_streaming_copy"] = Counter(bytes / ceiling.streaming_copy_bps, Counter::kIsRate);
    state.counters["copy_ceiling_bps"] = ceiling.copy_bps;
    state.counters["buffer_pairs"] = static_cast<double>(ws.pairs());
    state.counters["cache_resident"] = ws.cache_resident() ? 1 : 0;
    state.counters["compute_threads"] = impl.threads;
}

// The implementation prepared on the case's workspace, after one untimed call on pair 0 that
// warms code, caches of small cases and the thread pool, and proves the implementation computes
// the norm (a wrong peer would not be a peer); null, with the benchmark skipped, if it does not.
std::unique_ptr<Runner> prepare_checked(benchmark::State &state, Workspace &ws, const Implementation &impl) {
    std::unique_ptr<Runner> runner = impl.prepare(ws);
    const void *first = runner->run(0);
    const std::string mismatch = impl.computes_norm ? ws.check(first) : std::string();
    if (!mismatch.empty()) {
        state.SkipWithError(mismatch.c_str());
        return nullptr;
    }
    return runner;
}

}  // namespace

void run_benchmark(benchmark::State &state, const Case &c, const Implementation &impl) {
    try {
        Workspace &ws = Workspace::of(c);
        const std::unique_ptr<Runner> runner = prepare_checked(state, ws, impl);
        if (!runner) return;
        const bool nearby = measures_nearby_ceilings(ws, impl);
        const int threads = magi2norm::num_threads();
        const measure::CopyCeilings before = nearby ? measure::copy_ceilings_now(threads) : measure::copy_ceilings(threads);
        // Timed calls start on the pair the warm-up call did not just touch.
        std::size_t pair = 1 % ws.pairs();
        for (auto _ : state) {
            benchmark::DoNotOptimize(runner->run(pair));
            pair = pair + 1 == ws.pairs() ? 0 : pair + 1;
        }
        set_counters(state, c, ws, impl, nearby ? average(before, measure::copy_ceilings_now(threads)) : before);
    } catch (const std::exception &e) {
        state.SkipWithError(e.what());
    }
}

void run_after_idle_benchmark(benchmark::State &state, const Case &c, const Implementation &impl,
                              std::chrono::microseconds idle) {
    using Clock = std::chrono::steady_clock;
    constexpr int kSteadyCalls = 8;
    try {
        Workspace &ws = Workspace::of(c);
        const std::unique_ptr<Runner> runner = prepare_checked(state, ws, impl);
        if (!runner) return;
        std::size_t pair = 1 % ws.pairs();
        const auto next = [&] {
            const void *out = runner->run(pair);
            pair = pair + 1 == ws.pairs() ? 0 : pair + 1;
            return out;
        };
        Clock::duration after_idle{}, steady{};
        for (auto _ : state) {
            std::this_thread::sleep_for(idle);
            const Clock::time_point start = Clock::now();
            benchmark::DoNotOptimize(next());
            const Clock::duration call = Clock::now() - start;
            state.SetIterationTime(std::chrono::duration<double>(call).count());
            after_idle += call;
            const Clock::time_point steady_start = Clock::now();
            for (int i = 0; i < kSteadyCalls; ++i) benchmark::DoNotOptimize(next());
            steady += Clock::now() - steady_start;
        }
        const double calls = static_cast<double>(state.iterations());
        const double steady_us = std::chrono::duration<double, std::micro>(steady).count() / (calls * kSteadyCalls);
        const double after_idle_us = std::chrono::duration<double, std::micro>(after_idle).count() / calls;
        state.SetBytesProcessed(static_cast<std::int64_t>(c.bytes_moved() * calls));
        state.counters["steady_us"] = steady_us;
        state.counters["rate_of_steady"] = steady_us / after_idle_us;
        state.counters["compute_threads"] = impl.threads;
    } catch (const std::exception &e) {
        state.SkipWithError(e.what());
    }
}

}  // namespace magi2norm::bench
