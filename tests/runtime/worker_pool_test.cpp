// The library's CPU pool (runtime/src/devices/worker_pool.cpp): every iteration runs exactly
// once, on at most the threads asked for; the first failing iteration's result is the loop's; a
// loop nested in an iteration, or started while another thread's loop holds the pool, is refused
// (its caller runs it elsewhere); workers asleep after an idle gap still finish every loop.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "magi2norm/internal.hpp"

namespace {

using magi2norm::detail::try_run_on_pool;

struct Counts {
    std::vector<std::atomic<int>> runs;
    std::mutex mutex;
    std::set<std::thread::id> threads;
    explicit Counts(int size) : runs(static_cast<std::size_t>(size)) {}
};

int count_iteration(void *context, int index) {
    auto *counts = static_cast<Counts *>(context);
    counts->runs[static_cast<std::size_t>(index)].fetch_add(1);
    std::lock_guard<std::mutex> lock(counts->mutex);
    counts->threads.insert(std::this_thread::get_id());
    return 0;
}

TEST(WorkerPool, RunsEveryIterationOnceOnAtMostTheThreadsAsked) {
    for (int threads = 1; threads <= 4; ++threads) {
        for (int size : {0, 1, 2, 3, 7, 64, 1000}) {
            SCOPED_TRACE("threads " + std::to_string(threads) + ", size " + std::to_string(size));
            Counts counts(size);
            ASSERT_EQ(try_run_on_pool(threads, size, count_iteration, &counts), 0);
            for (const std::atomic<int> &runs : counts.runs) EXPECT_EQ(runs.load(), 1);
            EXPECT_LE(counts.threads.size(), static_cast<std::size_t>(threads));
            if (threads == 1 && size > 0) EXPECT_EQ(counts.threads, std::set<std::thread::id>{std::this_thread::get_id()});
        }
    }
}

int fail_from_ten(void *context, int index) {
    static_cast<std::atomic<int> *>(context)->fetch_add(1);
    return index >= 10 ? -(index) : 0;
}

TEST(WorkerPool, ALoopsResultIsAFailingIterationsAndTheRestStop) {
    std::atomic<int> ran{0};
    const std::optional<int> result = try_run_on_pool(2, 100000, fail_from_ten, &ran);
    ASSERT_TRUE(result.has_value());
    EXPECT_LE(*result, -10);
    EXPECT_LT(ran.load(), 100000) << "iterations after a failure were not skipped";
}

int nested_loop(void *context, int) {
    Counts inner(4);
    const std::optional<int> result = try_run_on_pool(2, 4, count_iteration, &inner);
    if (!result) static_cast<std::atomic<int> *>(context)->fetch_add(1);
    return 0;
}

TEST(WorkerPool, ALoopNestedInAnIterationIsRefused) {
    std::atomic<int> refused{0};
    ASSERT_EQ(try_run_on_pool(2, 8, nested_loop, &refused), 0);
    EXPECT_EQ(refused.load(), 8);
}

struct Gate {
    std::atomic<bool> entered{false}, release{false};
};

int hold_pool(void *context, int) {
    auto *gate = static_cast<Gate *>(context);
    gate->entered = true;
    while (!gate->release) std::this_thread::yield();
    return 0;
}

TEST(WorkerPool, ALoopWhileAnotherThreadHoldsThePoolIsRefused) {
    Gate gate;
    std::thread holder([&] { EXPECT_EQ(try_run_on_pool(1, 1, hold_pool, &gate), 0); });
    while (!gate.entered) std::this_thread::yield();
    Counts counts(3);
    EXPECT_FALSE(try_run_on_pool(2, 3, count_iteration, &counts).has_value());
    for (const std::atomic<int> &runs : counts.runs) EXPECT_EQ(runs.load(), 0) << "a refused loop ran nothing";
    gate.release = true;
    holder.join();
    EXPECT_EQ(try_run_on_pool(2, 3, count_iteration, &counts), 0);
}

// Loops 2 ms apart (past the workers' spin, so they sleep between loops), each with iterations
// long enough for a woken worker to take some.
int slow_iteration(void *context, int index) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return count_iteration(context, index);
}

TEST(WorkerPool, LoopsAfterIdleGapsFinish) {
    std::set<std::thread::id> all;
    for (int loop = 0; loop < 20; ++loop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        Counts counts(8);
        ASSERT_EQ(try_run_on_pool(2, 8, slow_iteration, &counts), 0);
        for (const std::atomic<int> &runs : counts.runs) EXPECT_EQ(runs.load(), 1);
        all.insert(counts.threads.begin(), counts.threads.end());
    }
    EXPECT_EQ(all.size(), 2u) << "a sleeping worker never woke to take an iteration";
}

}  // namespace
