// CallOptions: a call's own settings take effect for that call only, unset ones follow the
// process's, and neither changes a result. The threads a call uses are observed (every task runs
// through Halide's do_task, which this test hooks), not inferred from its speed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "HalideRuntime.h"
#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"

namespace contract {
namespace {

using magi2norm::CallOptions;
using magi2norm::Grouping;
using magi2norm::RMSNorm;

std::mutex seen_mutex;
std::set<std::thread::id> seen_threads;
// Tasks that take long enough for every thread the pool would use to wake up and take some.
std::atomic<bool> slow_tasks{false};

int recording_do_task(void *user_context, halide_task_t f, int idx, std::uint8_t *closure) {
    {
        std::lock_guard<std::mutex> lock(seen_mutex);
        seen_threads.insert(std::this_thread::get_id());
    }
    if (slow_tasks) std::this_thread::sleep_for(std::chrono::microseconds(300));
    return halide_default_do_task(user_context, f, idx, closure);
}

std::atomic<int> host_loop_calls{0};

void counting_loop(void *, int count, void (*task)(void *, int), void *task_context) {
    host_loop_calls.fetch_add(1);
    for (int i = 0; i < count; ++i) task(task_context, i);
}

bool on_cpu() { return magi2norm::default_backend() == magi2norm::Backend::cpu; }

class CallOptionsTest : public testing::Test {
protected:
    CallOptionsTest() : norm_({3072, 1e-6f, 1, 1, DType::f32}), x_(DType::bf16, {512, 3072}), out_(DType::f32, {512, 3072}) {
        Rng rng(5);
        fill_random_input(x_, rng);
    }
    void SetUp() override {
        if (!on_cpu()) GTEST_SKIP() << "thread and store settings are the CPU backend's";
        previous_ = halide_set_custom_do_task(recording_do_task);
    }
    void TearDown() override {
        if (on_cpu()) halide_set_custom_do_task(previous_);
        magi2norm::set_num_threads(0);
        magi2norm::set_parallel_for(nullptr);
        magi2norm::set_streaming_policy(magi2norm::default_streaming_policy());
        slow_tasks = false;
    }
    // The threads that ran tasks of one call with `options` (and host_loop_calls counts its host
    // loop's calls); its output equals the plain call's.
    std::set<std::thread::id> threads_of(const CallOptions &options) {
        ref::HostTensor expected(DType::f32, out_.shape());
        norm_.forward(x_.view(), Grouping::none(), expected.view());
        host_loop_calls = 0;
        {
            std::lock_guard<std::mutex> lock(seen_mutex);
            seen_threads.clear();
        }
        norm_.forward(x_.view(), Grouping::none(), out_.view(), options);
        EXPECT_TRUE(ref::identical(out_.view(), expected.view()));
        std::lock_guard<std::mutex> lock(seen_mutex);
        return seen_threads;
    }

    RMSNorm norm_;
    ref::HostTensor x_, out_;
    halide_do_task_t previous_ = nullptr;
};

TEST_F(CallOptionsTest, OneThreadRunsEveryTaskOnTheCallingThread) {
    magi2norm::set_num_threads(2);
    CallOptions one;
    one.num_threads = 1;
    const std::set<std::thread::id> used = threads_of(one);
    EXPECT_EQ(used, std::set<std::thread::id>{std::this_thread::get_id()});
    EXPECT_EQ(magi2norm::num_threads(), 2) << "a call's own setting leaves the process's alone";
}

TEST_F(CallOptionsTest, TheProcessThreadCountTakesEffectForLaterCalls) {
    magi2norm::set_num_threads(2);
    threads_of({});
    magi2norm::set_num_threads(1);
    EXPECT_EQ(threads_of({}), std::set<std::thread::id>{std::this_thread::get_id()});
}

// Halide's pool keeps the threads it started: after calls on four threads, a process count of
// two must still keep each call on two, and of one on the calling thread alone.
TEST_F(CallOptionsTest, AFallingThreadCountTakesEffectThoughThePoolKeepsItsThreads) {
    slow_tasks = true;
    magi2norm::set_num_threads(4);
    // Threads the pool starts may wake too late for one call on a loaded machine: calls until
    // more than two have run tasks.
    std::set<std::thread::id> pool;
    for (int call = 0; call < 50 && pool.size() <= 2; ++call) {
        const std::set<std::thread::id> used = threads_of({});
        pool.insert(used.begin(), used.end());
    }
    EXPECT_GT(pool.size(), 2u) << "the pool grew to more than two threads";
    magi2norm::set_num_threads(2);
    for (int call = 0; call < 5; ++call) EXPECT_LE(threads_of({}).size(), 2u);
    magi2norm::set_num_threads(1);
    EXPECT_EQ(threads_of({}), std::set<std::thread::id>{std::this_thread::get_id()});
    magi2norm::set_num_threads(3);
    EXPECT_LE(threads_of({}).size(), 3u);
    EXPECT_EQ(magi2norm::num_threads(), 3);
}

// The process's loop and streaming policy, set and reset between calls, apply to the calls that
// start after each change.
TEST_F(CallOptionsTest, TheProcesssLoopAndPolicyTakeEffectForLaterCalls) {
    magi2norm::set_parallel_for(counting_loop);
    threads_of({});
    EXPECT_GT(host_loop_calls.load(), 0);
    magi2norm::set_parallel_for(nullptr);
    magi2norm::set_num_threads(1);
    EXPECT_EQ(threads_of({}), std::set<std::thread::id>{std::this_thread::get_id()});
    EXPECT_EQ(host_loop_calls.load(), 0) << "the library's pool again";

    ref::HostTensor x(DType::f32, {2, 3072}), out(DType::f32, {2, 3072});
    magi2norm::set_streaming_policy({1, 0, 0});
    norm_.forward(x.view(), Grouping::none(), out.view());
    EXPECT_TRUE(ran_variant(magi2norm::Backend::cpu, DType::f32, DType::f32, MAGI2NORM_STREAMING_ALIGNMENT > 0));
    magi2norm::set_streaming_policy({0, 0, 0});
    norm_.forward(x.view(), Grouping::none(), out.view());
    EXPECT_TRUE(ran_variant(magi2norm::Backend::cpu, DType::f32, DType::f32, false));
}

TEST_F(CallOptionsTest, NeverMoreThreadsThanAsked) {
    magi2norm::set_num_threads(4);
    CallOptions two;
    two.num_threads = 2;
    EXPECT_LE(threads_of(two).size(), 2u);
}

TEST_F(CallOptionsTest, ACallsOwnLoopAndThePoolOverTheProcesss) {
    CallOptions host;
    host.parallel_loop = magi2norm::ParallelLoop{counting_loop, nullptr};
    threads_of(host);
    EXPECT_GT(host_loop_calls.load(), 0) << "the call's loop ran its tasks";
    magi2norm::set_parallel_for(counting_loop);
    CallOptions pool;
    pool.parallel_loop = magi2norm::ParallelLoop{};
    threads_of(pool);
    EXPECT_EQ(host_loop_calls.load(), 0) << "the library's pool, as the call asked, not the process's loop";
    threads_of({});
    EXPECT_GT(host_loop_calls.load(), 0) << "unset: the process's loop";
}

TEST_F(CallOptionsTest, ACallsOwnStreamingPolicy) {
    CallOptions always;
    always.streaming = magi2norm::StreamingPolicy{1, 0, 0};  // 6 MiB of output streams by default; this asks for any
    ref::HostTensor x(DType::f32, {2, 3072}), out(DType::f32, {2, 3072});
    norm_.forward(x.view(), Grouping::none(), out.view(), always);
    EXPECT_TRUE(ran_variant(magi2norm::Backend::cpu, DType::f32, DType::f32, MAGI2NORM_STREAMING_ALIGNMENT > 0));
    norm_.forward(x.view(), Grouping::none(), out.view());
    EXPECT_TRUE(ran_variant(magi2norm::Backend::cpu, DType::f32, DType::f32, false)) << "the process's policy is unchanged";
}

TEST_F(CallOptionsTest, OutDtypeAsThePositionalOverride) {
    CallOptions bf16;
    bf16.out_dtype = DType::bf16;
    ref::HostTensor a(DType::bf16, out_.shape()), b(DType::bf16, out_.shape());
    norm_.forward(x_.view(), Grouping::none(), a.view(), bf16);
    norm_.forward(x_.view(), Grouping::none(), b.view(), DType::bf16);
    EXPECT_TRUE(ref::identical(a.view(), b.view()));
}

}  // namespace
}  // namespace contract
