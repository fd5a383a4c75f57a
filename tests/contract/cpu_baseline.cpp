// Each CPU variant holds code for AVX-512, AVX2 and SSE4.1 and runs the best the machine has, so
// a machine checks only one of them. With MAGI2NORM_TEST_CPU=baseline this process tells Halide's
// dispatch that no optional CPU feature is there, and every call runs the SSE4.1 code (software
// FP16 conversions, 128-bit vectors), so the suites check the contract on it too (label
// `cpu_baseline`). The test below fails if the switch never reached the dispatch. With
// MAGI2NORM_TEST_CPU=no_avx512_bf16 only the AVX-512 BF16 variants are refused, so a machine with
// them checks the families they replace too (label `no_avx512_bf16`).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "HalideRuntime.h"
#include "magi2norm/magi2norm.hpp"

namespace contract {
namespace {

std::atomic<int> feature_queries{0};

int no_optional_features(int, const std::uint64_t *) {
    feature_queries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

// Everything the CPU has but Zen 4's AVX-512 (the AVX-512 BF16 variants' target): the runtime
// asks the same question of those variants (runtime/src/variants/isa.cpp), so the element and
// paired-word families serve BF16 outputs again.
int no_avx512_bf16(int count, const std::uint64_t *features) {
    constexpr int zen4 = halide_target_feature_avx512_zen4;
    if (zen4 / 64 < count && (features[zen4 / 64] >> (zen4 % 64) & 1) != 0) return 0;
    return halide_default_can_use_target_features(count, features);
}

bool cpu_asked(const char *what) {
    const char *cpu = std::getenv("MAGI2NORM_TEST_CPU");
    return cpu != nullptr && std::strcmp(cpu, what) == 0;
}
bool baseline_asked() { return cpu_asked("baseline"); }

// Before main, so before any norm runs: Halide reads the hook without synchronisation.
const bool forced = [] {
    if (baseline_asked()) halide_set_custom_can_use_target_features(no_optional_features);
    if (cpu_asked("no_avx512_bf16")) halide_set_custom_can_use_target_features(no_avx512_bf16);
    return true;
}();

TEST(CpuBaseline, EveryCallAsksTheSwitchWhenBaselineIsAsked) {
    if (!baseline_asked()) GTEST_SKIP() << "MAGI2NORM_TEST_CPU is not 'baseline': the machine's best code runs";
    ASSERT_TRUE(forced);
    magi2norm::NormConfig config;
    config.dim = 64;
    const magi2norm::RMSNorm norm(config);
    std::vector<float> x(64, 2.0f), out(64, 0.0f);
    norm.forward(magi2norm::ConstTensorView(x.data(), magi2norm::DType::f32, {1, 64}), magi2norm::Grouping::none(),
                 magi2norm::TensorView(out.data(), magi2norm::DType::f32, {1, 64}), std::nullopt,
                 magi2norm::Stream{magi2norm::Backend::cpu});
    // Each variant asks once, on its first call, and keeps the answer (no, for every feature).
    EXPECT_GT(feature_queries.load(), 0) << "the CPU dispatch never asked the switch: the baseline did not run";
    EXPECT_NEAR(out[0], 1.0f, 1e-6f);
}

TEST(CpuBaseline, NoAvx512Bf16TurnsTheirVariantsOff) {
    if (!cpu_asked("no_avx512_bf16")) GTEST_SKIP() << "MAGI2NORM_TEST_CPU is not 'no_avx512_bf16'";
    magi2norm::NormConfig config;
    config.dim = 64;
    const magi2norm::RMSNorm norm(config);
    std::vector<float> x(64, 2.0f);
    std::vector<std::uint16_t> out(64, 0);
    norm.forward(magi2norm::ConstTensorView(x.data(), magi2norm::DType::f32, {1, 64}), magi2norm::Grouping::none(),
                 magi2norm::TensorView(out.data(), magi2norm::DType::bf16, {1, 64}), magi2norm::DType::bf16,
                 magi2norm::Stream{magi2norm::Backend::cpu});
    EXPECT_EQ(std::strstr(magi2norm::last_variant(), "avx512bf16"), nullptr) << magi2norm::last_variant();
    EXPECT_EQ(out[0], 0x3f80);  // 1.0
}

}  // namespace
}  // namespace contract
