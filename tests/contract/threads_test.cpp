// The result does not depend on the thread count: one thread and two give identical bits (the
// row is the unit of work, so no reduction may be split differently). Host threads may call one
// norm at the same time: each gets the bits a call on its own gives.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"

namespace contract {
namespace {

struct ThreadCase {
    const char *name;
    DType in, out;
    ref::Shape x;
    std::int64_t num_modality;
};

class Threads : public testing::Test {
protected:
    // Back to the defaults for the tests that follow in this process.
    void TearDown() override {
        magi2norm::set_num_threads(0);
        magi2norm::set_streaming_policy(magi2norm::default_streaming_policy());
    }
};

// ctest runs each test in a process of its own, so this asks before any norm has run.
TEST_F(Threads, CountIsKnownBeforeTheFirstCall) {
    EXPECT_GE(magi2norm::num_threads(), 1);
    magi2norm::set_num_threads(1);
    EXPECT_EQ(magi2norm::num_threads(), 1);
}

TEST_F(Threads, OneAndTwoThreadsAgreeBitForBit) {
    Rng rng(31);
    const ThreadCase cases[] = {
        {"pre-norm bf16 M=3", DType::bf16, DType::bf16, {2053, 768}, 3},
        {"QK norm bf16 -> f32", DType::bf16, DType::f32, {257, 24, 128}, 1},
        {"final norm f32 width 12288", DType::f32, DType::f32, {67, 12288}, 1},
        {"f16 odd D", DType::f16, DType::f16, {1001, 7}, 3},
    };
    for (const ThreadCase &t : cases) {
        SCOPED_TRACE(t.name);
        const ref::HostTensor x = random_input(t.in, t.x, rng);
        NormCase c;
        c.x = x.view();
        c.config.dim = t.x.back();
        c.config.num_modality = t.num_modality;
        c.config.out_dtype = t.out;
        c.weight = random_weight(DType::bf16, {t.num_modality * t.x.back()}, rng);
        if (t.num_modality > 1) c.grouping = GroupingSpec::by_ids(random_ids(t.x[0], t.num_modality, rng), t.num_modality);

        magi2norm::set_num_threads(1);
        EXPECT_EQ(magi2norm::num_threads(), 1);
        const ref::HostTensor one = run_library(c);
        magi2norm::set_num_threads(2);
        EXPECT_EQ(magi2norm::num_threads(), 2);
        const ref::HostTensor two = run_library(c);
        EXPECT_TRUE(ref::identical(one.view(), two.view()));
    }
}

// Four host threads share one norm, each with its own shape, output dtype and grouping, the
// streaming path on and off; every call must give the bits of the same call made alone.
TEST_F(Threads, ConcurrentCallsFromHostThreadsMatchCallsMadeAlone) {
    Rng rng(37);
    constexpr std::int64_t D = 768, M = 3;
    const ref::HostTensor weight = random_weight(DType::bf16, {M * D}, rng);
    const magi2norm::RMSNorm norm({D, 1e-6f, M}, weight.view());
    struct Job {
        ref::HostTensor x;
        DType out;
        GroupingSpec grouping;
        ref::HostTensor expected;
    };
    std::vector<Job> jobs;
    jobs.push_back({random_input(DType::bf16, {1, D}, rng), DType::bf16, GroupingSpec::by_sizes({0, 1, 0}), {}});
    jobs.push_back({random_input(DType::bf16, {16, D}, rng), DType::f32, GroupingSpec::by_ids(random_ids(16, M, rng), M), {}});
    jobs.push_back({random_input(DType::f32, {257, D}, rng), DType::f16, GroupingSpec::by_sizes({100, 57, 100}), {}});
    jobs.push_back({random_input(DType::bf16, {2053, D}, rng), DType::f32, GroupingSpec::by_ids(random_ids(2053, M, rng), M), {}});

    for (const magi2norm::StreamingPolicy policy : {magi2norm::default_streaming_policy(), magi2norm::StreamingPolicy{1, 0, 0}}) {
        SCOPED_TRACE(policy.min_output_bytes == 1 ? "streaming every output" : "default streaming policy");
        magi2norm::set_streaming_policy(policy);
        for (Job &job : jobs) {
            job.expected = ref::HostTensor(job.out, job.x.shape());
            norm.forward(job.x.view(), job.grouping.library(), job.expected.view(), job.out);
        }
        std::atomic<int> mismatches{0};
        std::vector<std::thread> threads;
        for (const Job &job : jobs) {
            threads.emplace_back([&] {
                ref::HostTensor out(job.out, job.x.shape());
                for (int call = 0; call < 20; ++call) {
                    out.fill_bytes(0xAB);
                    norm.forward(job.x.view(), job.grouping.library(), out.view(), job.out);
                    if (out.bytes() != job.expected.bytes()) ++mismatches;
                }
            });
        }
        for (std::thread &thread : threads) thread.join();
        EXPECT_EQ(mismatches.load(), 0);
    }
}

}  // namespace
}  // namespace contract
