// RMSNorm::plan and Plan::run: a planned call gives the bits forward() gives (and so passes the
// same gates), checks per call what can change per call, and refuses the rest when planned.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"
#include "throws_error.hpp"

namespace contract {
namespace {

using magi2norm::ErrorCode;
using magi2norm::Grouping;
using magi2norm::RMSNorm;
using magi2norm::TensorView;

struct Planned {
    const char *name;
    DType in, out;
    ref::Shape x;
    std::int64_t num_modality;
    bool by_ids;
};

const Planned kCases[] = {
    {"pre-norm bf16 M=3 sizes", DType::bf16, DType::bf16, {37, 3072}, 3, false},
    {"Q/K bf16 -> f32 M=3 ids", DType::bf16, DType::f32, {19, 24, 128}, 3, true},
    {"mHC bf16 -> f32 T=1", DType::bf16, DType::f32, {1, 12288}, 1, false},
    {"final f32 M=1 T=600 (streaming stores)", DType::f32, DType::f32, {600, 12288}, 1, false},
    {"f16 odd D", DType::f16, DType::f16, {33, 7}, 1, false},
};

class PlanRun : public testing::TestWithParam<Planned> {};

// Run twice on fresh data (a plan is reused), each against forward() on the same data and the
// reference's gate 1 on the FP32 result.
TEST_P(PlanRun, SameBitsAsForwardOnEveryRun) {
    const Planned &t = GetParam();
    Rng rng(7);
    const std::int64_t tokens = t.x[0], dim = t.x.back();
    NormCase c;
    c.config.dim = dim;
    c.config.num_modality = t.num_modality;
    c.config.out_dtype = t.out;
    c.weight = random_weight(DType::bf16, {t.num_modality * dim}, rng);
    if (t.num_modality > 1) {
        c.grouping = t.by_ids ? GroupingSpec::by_ids(random_ids(tokens, t.num_modality, rng), t.num_modality)
                              : GroupingSpec::by_sizes(random_sizes_with_empty(tokens, t.num_modality, 1, rng));
    }
    const RMSNorm norm(c.config, c.weight.view());
    const Grouping grouping = c.grouping.library();
    ref::HostTensor x = random_input(t.in, t.x, rng);
    ref::HostTensor planned(t.out, norm.output_shape(t.x)), forwarded(t.out, norm.output_shape(t.x));
    // Planned from views with no data: plan() reads no pointer.
    const magi2norm::Plan plan = norm.plan(magi2norm::ConstTensorView(nullptr, t.in, t.x), grouping,
                                           TensorView(nullptr, t.out, planned.shape()));
    for (int run = 0; run < 2; ++run) {
        SCOPED_TRACE(run);
        fill_random_input(x, rng);
        c.x = x.view();
        if (t.by_ids) {
            plan.run(x.data(), planned.data(), c.grouping.ids.data());
        } else {
            plan.run(x.data(), planned.data());
        }
        norm.forward(x.view(), grouping, forwarded.view());
        EXPECT_TRUE(ref::identical(planned.view(), forwarded.view()));
        if (t.out == DType::f32) EXPECT_TRUE(ref::gate1_close(planned.view(), run_reference(c).view()));
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, PlanRun, testing::ValuesIn(kCases), [](const testing::TestParamInfo<Planned> &info) {
    std::string name = info.param.name;
    for (char &ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    return name;
});

class PlanChecks : public testing::Test {
protected:
    PlanChecks() : x_(DType::f32, {4, 64}), out_(DType::f32, {4, 64}) {
        Rng rng(3);
        fill_random_input(x_, rng);
        out_.fill_bytes(0xAB);
    }
    bool out_untouched() const {
        for (unsigned char b : out_.bytes()) {
            if (b != 0xAB) return false;
        }
        return true;
    }
    ref::HostTensor x_, out_;
};

TEST_F(PlanChecks, GeometryIsRefusedWhenPlanned) {
    const RMSNorm norm({64});
    EXPECT_TRUE(throws_error([&] { norm.plan(x_.view(), Grouping::none(), TensorView(nullptr, DType::f32, {4, 32})); },
                             ErrorCode::shape, {"shape"}));
    EXPECT_TRUE(throws_error([&] { norm.plan(x_.view(), Grouping::none(), TensorView(nullptr, DType::bf16, {4, 64})); },
                             ErrorCode::dtype, {"dtype"}));
    const RMSNorm three({64, 1e-6f, 3});
    EXPECT_TRUE(throws_error([&] { three.plan(x_.view(), Grouping::sizes({1, 1}), out_.view()); }, ErrorCode::grouping,
                             {"group sizes"}));
}

TEST_F(PlanChecks, PointersAreCheckedOnEveryRun) {
    const RMSNorm norm({64});
    const magi2norm::Plan plan = norm.plan(x_.view(), Grouping::none(), out_.view());
    EXPECT_TRUE(throws_error([&] { plan.run(nullptr, out_.data()); }, ErrorCode::null_data, {"input"}));
    EXPECT_TRUE(throws_error([&] { plan.run(x_.data(), nullptr); }, ErrorCode::null_data, {"output"}));
    EXPECT_TRUE(throws_error([&] { plan.run(out_.data(), out_.data()); }, ErrorCode::overlap, {"overlap"}));
    EXPECT_TRUE(out_untouched());
    plan.run(x_.data(), out_.data());
    EXPECT_FALSE(out_untouched());
}

TEST_F(PlanChecks, IdsAreCheckedOnEveryRun) {
    const RMSNorm norm({64, 1e-6f, 2});
    const std::vector<std::int32_t> planned_ids = {0, 1, 1, 0};
    const magi2norm::Plan plan = norm.plan(x_.view(), Grouping::ids(planned_ids.data(), 4), out_.view());
    EXPECT_TRUE(throws_error([&] { plan.run(x_.data(), out_.data()); }, ErrorCode::grouping, {"ids"}));
    EXPECT_TRUE(throws_error([&] { plan.run(x_.data(), out_.data(), nullptr); }, ErrorCode::null_data, {"ids"}));
    const std::vector<std::int32_t> bad = {0, 1, 2, 0};
    EXPECT_TRUE(throws_error([&] { plan.run(x_.data(), out_.data(), bad.data()); }, ErrorCode::modality_id, {"token 2"}));
    EXPECT_TRUE(out_untouched());
    // The ids of each run count, not those given to plan().
    const std::vector<std::int32_t> all_one = {1, 1, 1, 1};
    plan.run(x_.data(), out_.data(), all_one.data());
    ref::HostTensor expected(DType::f32, {4, 64});
    norm.forward(x_.view(), Grouping::ids(all_one.data(), 4), expected.view());
    EXPECT_TRUE(ref::identical(out_.view(), expected.view()));
}

TEST_F(PlanChecks, KeepsTheWeightItWasMadeWith) {
    RMSNorm norm({64});
    const magi2norm::Plan plan = norm.plan(x_.view(), Grouping::none(), out_.view());
    ref::HostTensor before(DType::f32, {4, 64});
    norm.forward(x_.view(), Grouping::none(), before.view());
    std::vector<float> weight(64, 2.0f);
    norm.set_weight(magi2norm::ConstTensorView(weight.data(), DType::f32, {64}));
    plan.run(x_.data(), out_.data());
    EXPECT_TRUE(ref::identical(out_.view(), before.view()));
    RMSNorm moved = std::move(norm);
    plan.run(x_.data(), out_.data());  // the plan holds the weight, not the norm
    EXPECT_TRUE(ref::identical(out_.view(), before.view()));
}

TEST_F(PlanChecks, AnEmptyPlanIsRefused) {
    const magi2norm::Plan plan;
    EXPECT_TRUE(throws_error([&] { plan.run(x_.data(), out_.data()); }, ErrorCode::config, {"plan"}));
}

// Streaming stores and the paired-word form are picked per run, by the pointers' alignment.
TEST(PlanVariants, PickedByEachRunsPointers) {
    if (magi2norm::default_backend() != magi2norm::Backend::cpu) GTEST_SKIP() << "the CPU backend's forms and stores";
    const RMSNorm norm({3072, 1e-6f, 1, 1, DType::bf16});
    ref::HostTensor x(DType::bf16, {1024 + 1, 3072}), out(DType::bf16, {1024 + 1, 3072});  // 6 MiB out
    // A policy that admits the 6 MiB output, whatever threshold the build's tuning record set.
    magi2norm::CallOptions options;
    options.streaming = magi2norm::StreamingPolicy{1 << 20, 2, 1};
    const magi2norm::Plan plan = norm.plan(magi2norm::ConstTensorView(nullptr, DType::bf16, {1024, 3072}), Grouping::none(),
                                           TensorView(nullptr, DType::bf16, {1024, 3072}), options);
    plan.run(x.data(), out.data());
    EXPECT_TRUE(ran_variant(magi2norm::Backend::cpu, DType::bf16, DType::bf16, MAGI2NORM_STREAMING_ALIGNMENT > 0, true));
    plan.run(x.data_at(1), out.data_at(1));  // two bytes past a word: neither form's alignment
    EXPECT_TRUE(ran_variant(magi2norm::Backend::cpu, DType::bf16, DType::bf16, false, false));
}

TEST(PlanThreads, ManyThreadsRunOnePlan) {
    Rng rng(11);
    const RMSNorm norm({768, 1e-6f, 1, 1, DType::f32});
    const magi2norm::Plan plan = norm.plan(magi2norm::ConstTensorView(nullptr, DType::bf16, {64, 768}), Grouping::none(),
                                           TensorView(nullptr, DType::f32, {64, 768}));
    std::vector<ref::HostTensor> inputs, outputs, alone;
    for (int i = 0; i < 4; ++i) {
        inputs.push_back(random_input(DType::bf16, {64, 768}, rng));
        outputs.emplace_back(DType::f32, ref::Shape{64, 768});
        alone.emplace_back(DType::f32, ref::Shape{64, 768});
        norm.forward(inputs.back().view(), Grouping::none(), alone.back().view());
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&, i] {
            for (int k = 0; k < 50; ++k) plan.run(inputs[i].data(), outputs[i].data());
        });
    }
    for (std::thread &t : threads) t.join();
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(ref::identical(outputs[i].view(), alone[i].view()));
}

}  // namespace
}  // namespace contract
