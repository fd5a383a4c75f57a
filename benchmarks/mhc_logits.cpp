// The mHC logits (RMSNorm::mhc_logits) on the model's case: x [T, 12288] BF16 (S = 4 streams of
// C = 3072), phi [12288, 24] FP32, M = 1 and 3, T = 16, 256, 4096, 16384. Counters: the products
// a second (T D N), their fraction of this machine's FP64 FMA rate (measure/fma_rate.hpp: the
// product's arithmetic, which bounds it), x's bytes a second and their fraction of the copy
// ceiling measured at start, and the call against the unfused path in this library (the norm to
// FP32 into memory, then a plain loop of the same FP64 products over it: `unfused_over_fused`,
// timed in the same benchmark). Each call is timed right after the previous on fresh x.
#include "mhc_logits_bench.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "copy_ceilings.hpp"
#include "float_codec.hpp"
#include "fma_rate.hpp"
#include "magi2norm/magi2norm.hpp"
#include "splitmix64.hpp"

namespace magi2norm::bench {

namespace {

constexpr std::int64_t kStreams = 4, kChannels = 3072, kDim = kStreams * kChannels, kColumns = 24;

struct Data {
    std::int64_t tokens, modalities;
    std::vector<std::uint16_t> x;
    std::vector<float> phi, logits, y32;
    std::vector<std::int64_t> sizes;
    RMSNorm norm;

    Data(std::int64_t t, std::int64_t m)
        : tokens(t), modalities(m), x(static_cast<std::size_t>(t * kDim)), phi(static_cast<std::size_t>(kDim * kColumns)),
          logits(static_cast<std::size_t>(t * kColumns)), norm(NormConfig{kDim, 1e-6f, m}) {
        measure::SplitMix64 random(7);
        const auto unit = [&] { return static_cast<float>(random.next() >> 40) * 0x1p-24f; };
        for (std::uint16_t &v : x) v = f32_to_bf16(2 * unit() - 1);
        for (float &v : phi) v = 0.02f * unit() - 0.01f;
        std::vector<float> weight(static_cast<std::size_t>(m * kDim));
        for (float &v : weight) v = 0.2f * unit() - 0.1f;
        norm.set_weight({weight.data(), DType::f32, {m * kDim}});
        for (std::int64_t k = 0; k < m; ++k) sizes.push_back(t / m + (k < t % m ? 1 : 0));
    }
    Grouping grouping() const { return modalities > 1 ? Grouping::sizes(sizes) : Grouping::none(); }
    void fused() { norm.mhc_logits({x.data(), DType::bf16, {tokens, kDim}}, grouping(), {phi.data(), DType::f32, {kDim, kColumns}},
                                   {logits.data(), DType::f32, {tokens, kColumns}}); }
    // The norm's FP32 output in memory, then the same products over it, a token a time.
    void unfused() {
        y32.resize(x.size());
        CallOptions options;
        options.out_dtype = DType::f32;
        norm.forward({x.data(), DType::bf16, {tokens, kDim}}, grouping(), {y32.data(), DType::f32, {tokens, kDim}}, options);
        for (std::int64_t t = 0; t < tokens; ++t) {
            double acc[kColumns] = {};
            const float *row = &y32[static_cast<std::size_t>(t * kDim)];
            for (std::int64_t d = 0; d < kDim; ++d) {
                for (std::int64_t j = 0; j < kColumns; ++j) acc[j] += double(row[d]) * phi[static_cast<std::size_t>(d * kColumns + j)];
            }
            for (std::int64_t j = 0; j < kColumns; ++j) logits[static_cast<std::size_t>(t * kColumns + j)] = static_cast<float>(acc[j]);
        }
    }
};

void run(benchmark::State &state, std::int64_t tokens, std::int64_t modalities) {
    Data data(tokens, modalities);
    data.fused();
    for (auto _ : state) {
        data.fused();
        benchmark::DoNotOptimize(data.logits.data());
    }
    // The unfused path, timed after the fused calls on the same data.
    data.unfused();
    const int unfused_calls = tokens >= 4096 ? 1 : 3;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < unfused_calls; ++i) data.unfused();
    const double unfused_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / unfused_calls;
    using benchmark::Counter;
    const double products = static_cast<double>(tokens) * kDim * kColumns, x_bytes = static_cast<double>(tokens) * kDim * 2;
    const int threads = std::max(1, num_threads());
    state.counters["products_per_second"] = Counter(products, Counter::kIsIterationInvariantRate);
    state.counters["frac_fp64_fma"] = Counter(products / measure::fp64_fma_rate(threads), Counter::kIsIterationInvariantRate);
    state.counters["x_bytes_per_second"] = Counter(x_bytes, Counter::kIsIterationInvariantRate);
    state.counters["frac_copy_x"] = Counter(x_bytes / measure::copy_ceilings(threads).copy_bps, Counter::kIsIterationInvariantRate);
    state.counters["fp64_fma_per_second"] = measure::fp64_fma_rate(threads);
    state.counters["unfused_us"] = unfused_s * 1e6;
    state.counters["unfused_over_fused"] = Counter(unfused_s, Counter::kIsIterationInvariantRate);
}

}  // namespace

void register_mhc_logits_benchmarks() {
    for (const std::int64_t m : {1, 3}) {
        for (const std::int64_t t : {16, 256, 4096, 16384}) {
            const std::string name = "mhc_logits/bf16_f32/N24/M" + std::to_string(m) + "/T" + std::to_string(t);
            benchmark::RegisterBenchmark(name.c_str(), [t, m](benchmark::State &state) { run(state, t, m); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
        }
    }
}

}  // namespace magi2norm::bench
