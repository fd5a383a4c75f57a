// Many host threads call backward on shared norms, each with its own shapes, groupings, dtypes,
// layouts and options (dx over dy, an accumulated dweight, a strided dx, thread counts, host
// loops), while other threads keep changing the process's thread count, parallel loop and
// streaming policy. Every result (dx and dweight) must equal, bit for bit, the same call made
// alone before, which is first checked against the float64 oracle (B1 and B2, or B3).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "backward_case.hpp"
#include "reference/gates.hpp"
#include "setting_changes.hpp"

namespace {

using backward_test::GroupingKind;
using backward_test::Inputs;
using magi2norm::DType;

constexpr int kCallers = 6, kCallsEach = 40;

struct Job {
    Inputs in;
    const magi2norm::RMSNorm *norm;
    DType dx_dtype, dweight_dtype;
    magi2norm::BackwardOptions options;
    bool in_place = false;
    bool padded_dx = false;  // dx rows twice as long as D apart
    ref::HostTensor old_dweight;
    ref::HostTensor dx_memory, dweight;  // the call made alone

    ref::Shape dx_memory_shape() const {
        ref::Shape s = in.x.shape();
        if (padded_dx) s.back() *= 2;
        return s;
    }
    // Runs the call into `dx_memory` (dy's copy when in place) and `dweight` (the old values first).
    void call(ref::HostTensor &dx_out, ref::HostTensor &dweight_out) const {
        dweight_out = old_dweight;
        magi2norm::BackwardOptions o = options;
        o.dx_dtype = dx_dtype;
        if (in_place) {
            dx_out = in.dy;
            norm->backward(in.x.view(), dx_out.view(), in.library_grouping(), dx_out.view(), dweight_out.view(), o);
            return;
        }
        dx_out = ref::HostTensor(dx_dtype, dx_memory_shape());
        dx_out.fill_bytes(0xAB);
        const ref::Shape &shape = in.x.shape();
        std::vector<std::int64_t> strides;
        if (padded_dx) {
            strides = ref::row_major_strides(dx_memory_shape());
            strides.back() = 1;
        }
        norm->backward(in.x.view(), in.dy.view(), in.library_grouping(), magi2norm::TensorView(dx_out.data(), dx_dtype, shape, strides),
                       dweight_out.view(), o);
    }
};

// The call alone, against the oracle: its dx is the FP32 call's (B1) or that call's cast (B3),
// its dweight the FP32 gradient added to the old value (B2 on the FP32 gradient).
void check_against_oracle(const Job &job) {
    const backward_test::Gradients o = backward_test::oracle(job.in.problem());
    const backward_test::Result f32 = backward_test::run_backward(job.in, DType::f32, DType::f32);
    EXPECT_TRUE(backward_test::b1_close(f32.dx, o));
    EXPECT_TRUE(backward_test::b2_close(f32.dweight, o.dscale, o.dscale_bound));
    ref::HostTensor dx = job.dx_memory;
    if (job.padded_dx) {
        const ref::Shape &shape = job.in.x.shape();
        std::vector<std::int64_t> strides = ref::row_major_strides(job.dx_memory_shape());
        strides.back() = 1;
        dx = ref::HostTensor::copy_of(magi2norm::ConstTensorView(job.dx_memory.data(), job.dx_dtype, shape, strides));
    }
    if (job.dx_dtype == DType::f32) {
        EXPECT_TRUE(ref::identical(dx.view(), f32.dx.view()));
    } else {
        EXPECT_TRUE(backward_test::b3_one_ulp(dx, f32.dx, o.dx, o.dx_terms));
    }
    ref::HostTensor expected(job.dweight_dtype, job.old_dweight.shape());
    for (std::int64_t i = 0; i < expected.size(); ++i) {
        expected.set(i, (job.options.accumulate_dweight ? job.old_dweight.get(i) : 0.0f) + f32.dweight.get(i));
    }
    EXPECT_TRUE(ref::identical(job.dweight.view(), expected.view()));
}

TEST(ConcurrencyBackward, CallsDuringSettingChangesEqualCallsMadeAlone) {
    // Shared norms: pre-norm (M = 3), Q/K (M = 3), patterns with singleton-head broadcasting, mHC.
    const Inputs pre = backward_test::make_inputs(DType::bf16, DType::bf16, DType::bf16, {300, 768}, 3, 1, GroupingKind::sizes, 1);
    const Inputs qk = backward_test::make_inputs(DType::bf16, DType::f32, DType::bf16, {130, 24, 128}, 3, 1, GroupingKind::ids, 2);
    const Inputs single = backward_test::make_inputs(DType::f16, DType::f32, DType::f32, {90, 1, 64}, 1, 4, GroupingKind::none, 3);
    const Inputs mhc = backward_test::make_inputs(DType::bf16, DType::f32, DType::bf16, {200, 12288}, 1, 1, GroupingKind::none, 4);
    const magi2norm::RMSNorm pre_norm(pre.config, pre.weight.view()), qk_norm(qk.config, qk.weight.view());
    const magi2norm::RMSNorm single_norm(single.config, single.weight.view()), mhc_norm(mhc.config, mhc.weight.view());

    std::vector<Job> jobs;
    const auto add = [&](const Inputs &in, const magi2norm::RMSNorm &norm, DType dx, DType dweight) -> Job & {
        Job job{in, &norm, dx, dweight};
        job.old_dweight = ref::HostTensor(dweight, in.weight.shape());
        for (std::int64_t i = 0; i < job.old_dweight.size(); ++i) job.old_dweight.set(i, 0.25f * static_cast<float>(i % 5));
        jobs.push_back(std::move(job));
        return jobs.back();
    };
    jobs.reserve(12);
    add(pre, pre_norm, DType::bf16, DType::f32);
    add(pre, pre_norm, DType::bf16, DType::bf16).in_place = true;
    add(pre, pre_norm, DType::f32, DType::bf16).options.accumulate_dweight = true;
    add(qk, qk_norm, DType::bf16, DType::f32);
    add(qk, qk_norm, DType::f16, DType::bf16).padded_dx = true;
    add(qk, qk_norm, DType::bf16, DType::f32).options.num_threads = 1;
    add(single, single_norm, DType::f16, DType::f32);
    add(single, single_norm, DType::bf16, DType::f16).options.parallel_loop = magi2norm::ParallelLoop{concurrency::serial_loop, nullptr};
    add(mhc, mhc_norm, DType::bf16, DType::f32);  // 4.7 MiB dx: streaming stores under the default policy
    add(mhc, mhc_norm, DType::bf16, DType::bf16).options.accumulate_dweight = true;

    for (Job &job : jobs) {
        job.call(job.dx_memory, job.dweight);
        check_against_oracle(job);
    }

    std::atomic<int> mismatches{0}, calls{0};
    concurrency::SettingChanges settings;
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
        callers.emplace_back([&, c] {
            ref::HostTensor dx, dweight;
            for (int n = 0; n < kCallsEach; ++n) {
                const Job &job = jobs[static_cast<std::size_t>(c * 7 + n * 3) % jobs.size()];
                job.call(dx, dweight);
                ++calls;
                if (dx.bytes() != job.dx_memory.bytes() || dweight.bytes() != job.dweight.bytes()) ++mismatches;
            }
        });
    }
    for (std::thread &t : callers) t.join();
    settings.stop();
    std::printf("%d caller threads x %d backward calls = %d calls over %zu jobs, %d setting changes\n", kCallers, kCallsEach,
                calls.load(), jobs.size(), settings.changes());
    EXPECT_EQ(calls.load(), kCallers * kCallsEach);
    EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
