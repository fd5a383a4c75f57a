// Each CPU variant holds code for AVX-512, AVX2 and SSE4.1 and runs the best the machine has, so
// a machine checks only one of them. With MAGI2NORM_TEST_CPU=baseline this process tells Halide's
// dispatch that no optional CPU feature is there, and every call runs the SSE4.1 code (software
// FP16 conversions, 128-bit vectors), so the suites check the contract on it too (label
// `cpu_baseline`). The test below fails if the switch never reached the dispatch.
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

bool baseline_asked() {
    const char *cpu = std::getenv("MAGI2NORM_TEST_CPU");
    return cpu != nullptr && std::strcmp(cpu, "baseline") == 0;
}

// Before main, so before any norm runs: Halide reads the hook without synchronisation.
const bool forced = [] {
    if (baseline_asked()) halide_set_custom_can_use_target_features(no_optional_features);
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

}  // namespace
}  // namespace contract
