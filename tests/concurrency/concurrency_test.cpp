// Many host threads call forward (and planned runs) on shared norms, each with its own shapes,
// groupings, dtypes, strides and call options, while other threads keep changing the process's
// thread count, parallel loop and streaming policy. Every result must equal, bit for bit, the
// same call made alone before; those results are checked against the reference first.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "magi2norm/magi2norm.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"
#include "setting_changes.hpp"

namespace {

using magi2norm::DType;
using magi2norm::Grouping;

constexpr int kCallers = 6, kCallsEach = 60;

// Values spread over a few binades, rounded to `dtype`.
ref::HostTensor random_tensor(DType dtype, const ref::Shape &shape, std::mt19937_64 &rng) {
    ref::HostTensor t(dtype, shape);
    std::uniform_real_distribution<float> value(-4.0f, 4.0f);
    for (std::int64_t i = 0; i < t.size(); ++i) t.set(i, value(rng));
    return t;
}

// One call: a norm, an input, its grouping, the output's dtype and strides, the call's options.
struct Job {
    const magi2norm::RMSNorm *norm;
    ref::Params params;
    const ref::HostTensor *weight;
    ref::HostTensor x;
    std::vector<std::int64_t> sizes;   // grouping by sizes when set
    std::vector<std::int32_t> ids;     // by ids when set
    DType out_dtype;
    ref::Shape out_strides;            // empty: dense
    magi2norm::CallOptions options;
    bool planned = false;
    ref::HostTensor expected;          // the call made alone, in the output's memory layout

    Grouping grouping() const {
        if (!ids.empty()) return Grouping::ids(ids.data(), static_cast<std::int64_t>(ids.size()));
        return sizes.empty() ? Grouping::none() : Grouping::sizes(sizes);
    }
    ref::Shape out_shape() const { return ref::output_shape(x.shape(), params.num_patterns); }
    // The output's memory: the dense shape, or twice each row's length with stride {2 D, 2}.
    ref::HostTensor make_memory() const {
        ref::Shape shape = out_shape();
        if (!out_strides.empty()) shape.back() *= 2;
        ref::HostTensor memory(out_dtype, shape);
        memory.fill_bytes(0xAB);
        return memory;
    }
    void call(ref::HostTensor &memory) const {
        const magi2norm::TensorView out(memory.data(), out_dtype, out_shape(), out_strides);
        if (planned) {
            const magi2norm::Plan plan = norm->plan(x.view(), grouping(), out, options);
            ids.empty() ? plan.run(x.data(), memory.data()) : plan.run(x.data(), memory.data(), ids.data());
        } else {
            norm->forward(x.view(), grouping(), out, options);
        }
    }
};

class Concurrency : public testing::Test {
protected:
    void TearDown() override {
        magi2norm::set_num_threads(0);
        magi2norm::set_parallel_for(nullptr);
        magi2norm::set_streaming_policy(magi2norm::default_streaming_policy());
    }
};

TEST_F(Concurrency, CallsDuringSettingChangesEqualCallsMadeAlone) {
    std::mt19937_64 rng(2027);
    // Three shared norms: the pre-norm (M = 3), a patterned QK norm, the wide final norm.
    const ref::HostTensor w_pre = random_tensor(DType::bf16, {3 * 768}, rng);
    const ref::HostTensor w_qk = random_tensor(DType::f32, {4 * 128}, rng);
    const ref::HostTensor w_final = random_tensor(DType::bf16, {3072}, rng);
    const magi2norm::RMSNorm pre({768, 1e-6f, 3}, w_pre.view());
    const magi2norm::RMSNorm qk({128, 1e-5f, 1, 4}, w_qk.view());
    const magi2norm::RMSNorm final_norm({3072, 1e-6f, 1}, w_final.view());
    const ref::Params p_pre{768, 1e-6f, 3, 1}, p_qk{128, 1e-5f, 1, 4}, p_final{3072, 1e-6f, 1, 1};

    std::vector<Job> jobs;
    const auto add = [&](const magi2norm::RMSNorm &norm, const ref::Params &params, const ref::HostTensor &weight, DType in,
                         ref::Shape shape, DType out) {
        Job job{&norm, params, &weight, random_tensor(in, shape, rng), {}, {}, out, {}, {}, false, {}};
        job.options.out_dtype = out;
        jobs.push_back(std::move(job));
        return &jobs.back();
    };
    jobs.reserve(16);
    add(pre, p_pre, w_pre, DType::bf16, {1, 768}, DType::bf16)->sizes = {0, 1, 0};
    add(pre, p_pre, w_pre, DType::bf16, {2053, 768}, DType::bf16)->sizes = {1000, 53, 1000};
    {
        Job *j = add(pre, p_pre, w_pre, DType::f32, {257, 768}, DType::f16);
        std::uniform_int_distribution<int> id(0, 2);
        for (int t = 0; t < 257; ++t) j->ids.push_back(id(rng));
    }
    {
        Job *j = add(pre, p_pre, w_pre, DType::bf16, {513, 768}, DType::f32);
        std::uniform_int_distribution<int> id(0, 2);
        for (int t = 0; t < 513; ++t) j->ids.push_back(id(rng));
        j->planned = true;
    }
    add(pre, p_pre, w_pre, DType::bf16, {96, 768}, DType::bf16)->sizes = {32, 32, 32};
    jobs.back().out_strides = {2 * 768, 2};  // strided output: the element form
    add(qk, p_qk, w_qk, DType::bf16, {257, 4, 128}, DType::f32);
    add(qk, p_qk, w_qk, DType::bf16, {64, 1, 128}, DType::bf16);  // singleton heads broadcast
    add(qk, p_qk, w_qk, DType::f16, {33, 4, 128}, DType::f16)->planned = true;
    add(final_norm, p_final, w_final, DType::f32, {67, 3072}, DType::f32);
    add(final_norm, p_final, w_final, DType::bf16, {512, 3072}, DType::bf16);                 // 3 MiB out
    add(final_norm, p_final, w_final, DType::bf16, {700, 3072}, DType::f32)->options.num_threads = 1;
    add(final_norm, p_final, w_final, DType::bf16, {96, 3072}, DType::bf16)->options.parallel_loop = magi2norm::ParallelLoop{concurrency::serial_loop, nullptr};
    add(final_norm, p_final, w_final, DType::f32, {256, 3072}, DType::f32)->options.streaming = magi2norm::StreamingPolicy{1, 0, 0};

    // Each call alone, with the process's defaults, checked against the reference.
    for (Job &job : jobs) {
        job.expected = job.make_memory();
        job.call(job.expected);
        const std::vector<std::int32_t> modality = !job.ids.empty() ? job.ids : ref::modality_from_sizes(job.sizes);
        const ref::HostTensor y32 = ref::rms_norm(job.params, job.weight->view(), job.x.view(), modality);
        const magi2norm::ConstTensorView got(job.expected.data(), job.out_dtype, job.out_shape(), job.out_strides);
        if (job.out_dtype == DType::f32) {
            EXPECT_TRUE(ref::gate1_close(got, y32.view()));
        } else {
            EXPECT_TRUE(ref::gate3_within_local_ulp(got, y32.cast(job.out_dtype).view()));
        }
    }

    std::atomic<int> mismatches{0}, calls{0};
    concurrency::SettingChanges settings;
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
        callers.emplace_back([&, c] {
            std::vector<ref::HostTensor> memory;
            for (const Job &job : jobs) memory.push_back(job.make_memory());
            for (int n = 0; n < kCallsEach; ++n) {
                const std::size_t j = static_cast<std::size_t>(c * 7 + n * 5) % jobs.size();
                memory[j].fill_bytes(0xAB);
                jobs[j].call(memory[j]);
                ++calls;
                if (memory[j].bytes() != jobs[j].expected.bytes()) ++mismatches;
            }
        });
    }
    for (std::thread &t : callers) t.join();
    settings.stop();
    std::printf("%d caller threads x %d calls = %d calls over %zu jobs, %d setting changes, %d host-loop runs\n", kCallers, kCallsEach,
                calls.load(), jobs.size(), settings.changes(), concurrency::SettingChanges::host_loop_calls());
    EXPECT_EQ(calls.load(), kCallers * kCallsEach);
    EXPECT_EQ(mismatches.load(), 0);
    EXPECT_GT(concurrency::SettingChanges::host_loop_calls(), 0) << "the process's host loops ran some calls";
}

}  // namespace
