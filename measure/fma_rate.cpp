#include "fma_rate.hpp"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace magi2norm::measure {

namespace {

constexpr int kChains = 12;     // independent accumulators: enough to hide the FMA latency
constexpr long kSteps = 1 << 22;  // per run and thread: about 0.1 s at AVX-512 rates

// Each returns its chains' sum, so that the loop is not removed.
__attribute__((target("avx512f"))) double chains_avx512(long steps) {
    __m512d acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_pd(i);
    const __m512d a = _mm512_set1_pd(0.9999999), b = _mm512_set1_pd(1e-9);
    for (long s = 0; s < steps; ++s) {
        for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_pd(acc[i], a, b);
    }
    double sum = 0;
    for (int i = 0; i < kChains; ++i) sum += _mm512_reduce_add_pd(acc[i]);
    return sum;
}

__attribute__((target("avx2,fma"))) double chains_avx2(long steps) {
    __m256d acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_pd(i);
    const __m256d a = _mm256_set1_pd(0.9999999), b = _mm256_set1_pd(1e-9);
    for (long s = 0; s < steps; ++s) {
        for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_pd(acc[i], a, b);
    }
    double lanes[4], sum = 0;
    for (int i = 0; i < kChains; ++i) {
        _mm256_storeu_pd(lanes, acc[i]);
        sum += lanes[0] + lanes[1] + lanes[2] + lanes[3];
    }
    return sum;
}

double chains_scalar(long steps) {
    double acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = i;
    for (long s = 0; s < steps; ++s) {
        for (double &v : acc) v = v * 0.9999999 + 1e-9;
    }
    double sum = 0;
    for (double v : acc) sum += v;
    return sum;
}

double measure(int threads) {
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const int lanes = avx512 ? 8 : avx2 ? 4 : 1;
    const auto run = [&] { return avx512 ? chains_avx512(kSteps) : avx2 ? chains_avx2(kSteps) : chains_scalar(kSteps); };
    double best = 0;
    for (int r = 0; r < 3; ++r) {
        std::vector<double> sums(static_cast<std::size_t>(threads));
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::thread> workers;
        for (int t = 0; t < threads; ++t) workers.emplace_back([&, t] { sums[t] = run(); });
        for (std::thread &w : workers) w.join();
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        volatile double sink = sums[0];
        (void)sink;
        best = std::max(best, static_cast<double>(threads) * kSteps * kChains * lanes / seconds);
    }
    return best;
}

}  // namespace

double fp64_fma_rate(int threads) {
    static const double rate = measure(std::max(1, threads));
    return rate;
}

}  // namespace magi2norm::measure
