// magi2norm_bench: the norm against the memory system and against peers, case by case.
//   magi2norm_bench [Google Benchmark flags: --benchmark_filter, --benchmark_format=json, ...]
// Benchmarks are named <norm>/<in>_<out>/<grouping>/T<tokens>/<implementation>; the copy
// ceilings and the machine's cache size go into the JSON context. Notes go to stderr, so that
// stdout is pure JSON with --benchmark_format=json.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "backward_bench.hpp"
#include "copy_ceilings.hpp"
#include "harness.hpp"
#include "mhc_logits_bench.hpp"
#include "pool_dispatch.hpp"

namespace {

using namespace magi2norm::bench;

constexpr std::int64_t kTinyCallTokens = 16;
constexpr double kTinyCallWarmUpSeconds = 0.5;

// Calls after an idle gap (run_after_idle_benchmark): the model's in-cache cases with one
// modality, for ours (planned, the calls whose views are checked once, where they run: T = 16),
// the hand-written bar and, at T = 16, the memcpy of as many bytes: the machine's own rate after
// the same gap. Each call after 5 ms without calls.
constexpr std::chrono::microseconds kIdleGap{5000};
constexpr std::int64_t kIdleGapTokens[] = {16, 256};
constexpr benchmark::IterationCount kIdleGapCalls = 100;

bool measured_after_idle(const Case &c, const Implementation &impl) {
    const bool tokens = std::find(std::begin(kIdleGapTokens), std::end(kIdleGapTokens), c.tokens) != std::end(kIdleGapTokens);
    const bool model = c.norm == "pre_norm" || c.norm == "qk_norm" || c.norm == "mhc_norm" || c.norm == "final_norm";
    return tokens && model && c.num_modality == 1 &&
           (impl.name == "ours" || impl.name == "ours_planned" || impl.name == "ours_integer_bf16" || impl.name == "hand_avx2" ||
            impl.name == "hand_avx512" || impl.name == "memcpy");
}

// Starts the Halide thread pool (shared by ours and the autoscheduled peers) before anything is
// timed: a pre-norm at T = 4096 hands out enough tasks to wake every worker.
void warm_thread_pool() {
    Case c{"warm_up", {3072}, magi2norm::DType::bf16, magi2norm::DType::bf16, 4096, 1, GroupingKind::none};
    Workspace ws(c);
    ours().prepare(ws)->run(0);
}

void add_context(const magi2norm::measure::CopyCeilings &ceiling) {
    auto gbps = [](double bps) { return std::to_string(bps / 1e9); };
    benchmark::AddCustomContext("ceiling_memcpy_GBps", gbps(ceiling.memcpy_bps));
    benchmark::AddCustomContext("ceiling_copy_GBps", gbps(ceiling.copy_bps));
    benchmark::AddCustomContext("ceiling_streaming_copy_GBps", gbps(ceiling.streaming_copy_bps));
    benchmark::AddCustomContext("ceiling_threads", std::to_string(ceiling.threads));
    benchmark::AddCustomContext("ceiling_bytes", std::to_string(ceiling.bytes));
    benchmark::AddCustomContext("last_level_cache_bytes", std::to_string(last_level_cache_bytes()));
    benchmark::AddCustomContext("magi2norm_threads", std::to_string(magi2norm::num_threads()));
}

}  // namespace

int main(int argc, char **argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    // First, so that every thread count read below (implementations, ceilings) is the pool's:
    // magi2norm::num_threads() reads 0 until the Halide runtime has run a pipeline.
    warm_thread_pool();

    std::vector<Implementation> implementations = {ours(),           ours_planned(),   ours_integer_bf16(), ours_untuned(),
                                                   memcpy_reference(), scalar_peer(), hand_avx2_peer()};
    // Made only where it runs: all of its file is AVX-512 code.
    if (hand_avx512_runs_here()) {
        implementations.push_back(hand_avx512_peer());
        implementations.push_back(hand_avx512_fp32_tree_candidate());
    }
    for (Implementation &form : ours_view_forms()) implementations.push_back(std::move(form));
    for (Implementation &peer : halide_autoscheduler_peers()) implementations.push_back(std::move(peer));
    std::string torch_note;
    for (Implementation &peer : torch_peers(torch_note)) implementations.push_back(std::move(peer));
    if (!torch_note.empty()) std::fprintf(stderr, "%s\n", torch_note.c_str());
    benchmark::AddCustomContext("torch_peers", torch_note.empty() ? "registered" : torch_note);

    // Registered case by case, so each case's data is made once and shared by all implementations.
    for (const Case &c : all_cases()) {
        for (const Implementation &impl : implementations) {
            if (!impl.supports(c)) continue;
            benchmark::internal::Benchmark *b =
                benchmark::RegisterBenchmark((c.name() + "/" + impl.name).c_str(),
                                             [c, impl](benchmark::State &state) { run_benchmark(state, c, impl); })
                    ->UseRealTime()
                    ->Unit(benchmark::kMicrosecond);
            // The tiny calls (the tiny-call target's T <= 16) first run untimed for a while: what
            // the case before them leaves running (the PyTorch peers' threads, say) fades within
            // about half a second, and their first repetitions would measure it instead.
            if (c.tokens <= kTinyCallTokens) b->MinWarmUpTime(kTinyCallWarmUpSeconds);
            if (measured_after_idle(c, impl)) {
                benchmark::RegisterBenchmark((c.name() + "/" + impl.name + "/after_idle_5ms").c_str(),
                                             [c, impl](benchmark::State &state) { run_after_idle_benchmark(state, c, impl, kIdleGap); })
                    ->UseManualTime()
                    ->Iterations(kIdleGapCalls)
                    ->Unit(benchmark::kMicrosecond);
            }
        }
    }

    register_backward_benchmarks();
    register_mhc_logits_benchmarks();
    register_pool_benchmarks();

    const magi2norm::measure::CopyCeilings &ceiling = magi2norm::measure::copy_ceilings(magi2norm::num_threads());
    std::fprintf(stderr, "ceilings with %d threads: memcpy %.1f GB/s, copy %.1f GB/s, streaming copy %.1f GB/s\n",
                 ceiling.threads, ceiling.memcpy_bps / 1e9, ceiling.copy_bps / 1e9, ceiling.streaming_copy_bps / 1e9);
    add_context(ceiling);

    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
