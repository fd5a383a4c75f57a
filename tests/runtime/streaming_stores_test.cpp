// Which CPU calls the runtime sends to the streaming-store variants (call_plan.cpp,
// plan_variants and choose_kernel). Those variants require an aligned output and refuse any other
// with an error (generators/magi2_norm_generator.cpp, require_streaming_layout), so the runtime
// must send exactly the calls they accept, and only those the streaming policy admits. The
// contract suites check that both kinds of variant give the same bytes
// (tests/contract/streaming_test.cpp).
#include <gtest/gtest.h>

#include <cstdint>

#include "magi2norm/internal.hpp"

namespace {

using magi2norm::Backend;
using magi2norm::DType;
using magi2norm::Memory;
using magi2norm::detail::CallPlan;

constexpr std::int64_t kAlignment = MAGI2NORM_STREAMING_ALIGNMENT;
// Addresses are only compared, never dereferenced.
constexpr std::uintptr_t kAligned = 1 << 20;

const magi2norm::detail::NormState &norm_state() {
    static magi2norm::detail::NormState state;
    state.config.dim = 3072;
    return state;
}

// The pre-norm at T = 4096 ([4096, 3072] bf16 -> bf16, 24 MiB of output), dense.
CallPlan pre_norm() {
    CallPlan c;
    c.norm = &norm_state();
    c.layout.extent = {3072, 1, 1, 4096};
    c.layout.x_stride = {1, 3072, 3072, 3072};
    c.layout.out_stride = {1, 3072, 3072, 3072};
    c.x.dtype = c.out.dtype = DType::bf16;
    return c;
}

// Whether `c`, planned, takes streaming stores with its output at `address`.
bool takes_streaming_stores(CallPlan c, std::uintptr_t address = kAligned) {
    magi2norm::detail::plan_variants(c);
    const auto &kernel = magi2norm::detail::choose_kernel(c, reinterpret_cast<const void *>(kAligned),
                                                          reinterpret_cast<const void *>(address));
    return kernel.streaming_alignment > 0;
}

class StreamingStores : public testing::Test {
protected:
    void SetUp() override {
        if (kAlignment == 0) GTEST_SKIP() << "built with MAGI2NORM_STREAMING_STORES=OFF: no streaming-store variants";
    }
    void TearDown() override { magi2norm::set_streaming_policy(magi2norm::default_streaming_policy()); }
};

TEST(StreamingStoresWithoutVariants, NeverWhenTheBuildHasNone) {
    if (kAlignment != 0) GTEST_SKIP() << "built with streaming-store variants";
    magi2norm::set_streaming_policy({1, 0, 0});
    EXPECT_FALSE(takes_streaming_stores(pre_norm()));
    magi2norm::set_streaming_policy(magi2norm::default_streaming_policy());
}

TEST_F(StreamingStores, AlignedModelOutputsFromMemory) {
    EXPECT_TRUE(takes_streaming_stores(pre_norm()));
    CallPlan qk = pre_norm();  // Q/K: [4096, 24, 128] bf16 -> f32
    qk.layout.extent = {128, 24, 1, 4096};
    qk.layout.x_stride = qk.layout.out_stride = {1, 128, 3072, 3072};
    qk.out.dtype = DType::f32;
    EXPECT_TRUE(takes_streaming_stores(qk));
    CallPlan heads_apart = qk;  // heads outermost in memory: [24, 4096, 128]
    heads_apart.layout.out_stride = {1, 4096 * 128, 4096 * 128 * 24, 128};
    EXPECT_TRUE(takes_streaming_stores(heads_apart));
}

TEST_F(StreamingStores, NotWhenTheVariantsCannotStoreAligned) {
    EXPECT_FALSE(takes_streaming_stores(pre_norm(), kAligned + 2)) << "first element off by one element";
    EXPECT_FALSE(takes_streaming_stores(pre_norm(), kAligned + kAlignment / 2)) << "first element off by half the alignment";
    CallPlan odd_row = pre_norm();
    odd_row.layout.extent[0] = odd_row.layout.out_stride[1] = odd_row.layout.out_stride[2] = odd_row.layout.out_stride[3] =
        3072 + kAlignment / 4;
    EXPECT_FALSE(takes_streaming_stores(odd_row)) << "rows of bf16 half the alignment past a multiple of it";
    CallPlan strided_row = pre_norm();
    strided_row.layout.out_stride = {2, 6144, 6144, 6144};
    EXPECT_FALSE(takes_streaming_stores(strided_row)) << "every other element";
    CallPlan token_gap = pre_norm();
    token_gap.layout.out_stride[3] = 3072 + 1;
    EXPECT_FALSE(takes_streaming_stores(token_gap)) << "tokens one element apart from a multiple";
    // An axis of extent 1 is never stepped over: its stride does not matter.
    CallPlan unit_axis = pre_norm();
    unit_axis.layout.out_stride[1] = 7;
    EXPECT_TRUE(takes_streaming_stores(unit_axis));
}

bool has_backend(Backend backend) {
    for (Backend b : magi2norm::compiled_backends()) {
        if (b == backend) return true;
    }
    return false;
}

TEST_F(StreamingStores, OnlyCpuCallsOnHostMemory) {
    CallPlan c = pre_norm();
    c.backend = Backend::opencl;
    if (has_backend(Backend::opencl)) EXPECT_FALSE(takes_streaming_stores(c));
    c.backend = Backend::cpu;
    c.memory = Memory::device;
    EXPECT_FALSE(takes_streaming_stores(c));
}

TEST_F(StreamingStores, FollowsThePolicy) {
    CallPlan small = pre_norm();
    small.layout.extent[3] = 16;  // 96 KiB of output: stays in cache for its consumer
    EXPECT_FALSE(takes_streaming_stores(small));
    magi2norm::set_streaming_policy({1, 0, 0});
    EXPECT_TRUE(takes_streaming_stores(small));
    magi2norm::set_streaming_policy({0, 0, 0});
    EXPECT_FALSE(takes_streaming_stores(pre_norm())) << "0 bytes: never";
    magi2norm::set_streaming_policy({1, 4, 0});
    EXPECT_FALSE(takes_streaming_stores(pre_norm())) << "16-bit outputs excluded";
    magi2norm::set_streaming_policy({1, 0, 4096});
    EXPECT_FALSE(takes_streaming_stores(pre_norm())) << "rows shorter than 4096 excluded";
}

TEST_F(StreamingStores, ACallsOwnPolicyOverridesTheProcesss) {
    CallPlan small = pre_norm();
    small.layout.extent[3] = 16;
    small.streaming = magi2norm::StreamingPolicy{1, 0, 0};
    EXPECT_TRUE(takes_streaming_stores(small));
    magi2norm::set_streaming_policy({1, 0, 0});
    CallPlan never = pre_norm();
    never.streaming = magi2norm::StreamingPolicy{0, 0, 0};
    EXPECT_FALSE(takes_streaming_stores(never));
}

}  // namespace
