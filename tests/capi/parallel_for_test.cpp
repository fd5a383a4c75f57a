// set_parallel_for: CPU calls run their parallel loop on the host's loop, with the same bits as
// the library's own pool, and nullptr gives the pool back.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"

namespace {

using magi2norm::DType;

struct Counts {
    int loops = 0;
    std::atomic<int> tasks{0};
};

// Every task on the calling thread, in order.
void serial_loop(void *context, int count, void (*task)(void *, int), void *task_context) {
    auto *counts = static_cast<Counts *>(context);
    ++counts->loops;
    for (int i = 0; i < count; ++i) {
        task(task_context, i);
        ++counts->tasks;
    }
}

// The tasks spread over three threads of the host's own, in reverse order.
void threaded_loop(void *context, int count, void (*task)(void *, int), void *task_context) {
    auto *counts = static_cast<Counts *>(context);
    ++counts->loops;
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
        threads.emplace_back([=] {
            for (int i = count - 1 - t; i >= 0; i -= 3) {
                task(task_context, i);
                ++counts->tasks;
            }
        });
    }
    for (std::thread &thread : threads) thread.join();
}

class ParallelFor : public testing::Test {
protected:
    void SetUp() override {
        contract::Rng rng(53);
        x_ = contract::random_input(DType::bf16, {2053, 768}, rng);
        case_.x = x_.view();
        case_.config = {768, 1e-6f, 3};
        case_.weight = contract::random_weight(DType::bf16, {3, 768}, rng);
        case_.grouping = contract::GroupingSpec::by_ids(contract::random_ids(2053, 3, rng), 3);
    }
    void TearDown() override { magi2norm::set_parallel_for(nullptr); }

    ref::HostTensor x_;
    contract::NormCase case_;
};

TEST_F(ParallelFor, HostLoopGivesTheSameBits) {
    const ref::HostTensor pool = contract::run_library(case_);
    for (magi2norm::ParallelFor loop : {&serial_loop, &threaded_loop}) {
        Counts counts;
        magi2norm::set_parallel_for(loop, &counts);
        const ref::HostTensor host = contract::run_library(case_);
        EXPECT_EQ(counts.loops, 1);
        EXPECT_GT(counts.tasks.load(), 1);
        EXPECT_TRUE(ref::identical(host.view(), pool.view()));
    }
}

TEST_F(ParallelFor, NullRestoresTheLibraryPool) {
    Counts counts;
    magi2norm::set_parallel_for(serial_loop, &counts);
    magi2norm::set_parallel_for(nullptr);
    contract::run_library(case_);
    EXPECT_EQ(counts.loops, 0);
}

}  // namespace
