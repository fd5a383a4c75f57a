// Training: the forward that also writes each output row's inverse RMS (CallOptions::inverse_rms)
// and the backward that takes it (BackwardOptions::inverse_rms). The forward writes the same
// output bits with it as without, and the inverse RMS its output was scaled by: an FP32 output
// equals (x * inv) * scale computed here from the returned inv, and inv is within FP32 rounding of
// one from a float64 sum. The backward gives the same dx and dweight bits from it as from its own
// row sums, and B1-B3 against the float64 oracle. Bad views are refused, naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backward_case.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"
#include "throws_error.hpp"

namespace backward_test {
namespace {

using magi2norm::BackwardOptions;
using magi2norm::CallOptions;
using magi2norm::ErrorCode;
using magi2norm::RMSNorm;

struct TrainingCase {
    std::string name;
    ref::Shape shape;
    std::int64_t num_modality, num_patterns;
    GroupingKind grouping;
    DType x, dy, out;
};

std::vector<TrainingCase> training_cases() {
    const DType all[] = {DType::f32, DType::bf16, DType::f16};
    std::vector<TrainingCase> cases;
    const TrainingCase shapes[] = {{"pre_norm", {70, 3072}, 1, 1, GroupingKind::none},
                                   {"odd_by_sizes", {90, 37}, 3, 1, GroupingKind::sizes},
                                   {"qk_by_ids", {40, 6, 128}, 3, 1, GroupingKind::ids},
                                   {"patterns", {33, 4, 64}, 2, 4, GroupingKind::sizes},
                                   {"singleton", {50, 1, 64}, 1, 4, GroupingKind::none},
                                   {"rank4", {9, 3, 4, 48}, 1, 4, GroupingKind::none}};
    for (const TrainingCase &s : shapes) {
        for (const DType x : all) {
            for (const DType out : all) {
                TrainingCase c = s;
                c.x = x;
                c.dy = out == x ? x : DType::f32;
                c.out = out;
                c.name = s.name + std::string("_") + magi2norm::dtype_name(x) + "_" + magi2norm::dtype_name(out);
                cases.push_back(c);
            }
        }
    }
    return cases;
}

class Training : public testing::TestWithParam<TrainingCase> {};

TEST_P(Training, ForwardWritesTheInverseRmsItsOutputWasScaledBy) {
    const TrainingCase &c = GetParam();
    const Inputs in = make_inputs(c.x, c.dy, DType::bf16, c.shape, c.num_modality, c.num_patterns, c.grouping, 11);
    ref::HostTensor inv;
    const ref::HostTensor plain = run_forward(in, magi2norm::Backend::cpu, c.out, nullptr);
    const ref::HostTensor training = run_forward(in, magi2norm::Backend::cpu, c.out, &inv);
    EXPECT_TRUE(ref::identical(training.view(), plain.view())) << "the output with the inverse RMS differs from the one without";
    EXPECT_NE(std::string(magi2norm::last_variant()).find("inverse_rms"), std::string::npos) << magi2norm::last_variant();
    ref::HostTensor inv32;
    const ref::HostTensor out32 = run_forward(in, magi2norm::Backend::cpu, DType::f32, &inv32);
    EXPECT_TRUE(ref::identical(inv32.view(), inv.view())) << "the inverse RMS depends on the output dtype";
    expect_inverse_rms_of_output(in, out32, inv32);
}

TEST_P(Training, BackwardFromTheInverseRmsGivesTheSameBits) {
    const TrainingCase &c = GetParam();
    const Inputs in = make_inputs(c.x, c.dy, DType::bf16, c.shape, c.num_modality, c.num_patterns, c.grouping, 12);
    ref::HostTensor inv;
    run_forward(in, magi2norm::Backend::cpu, c.x, &inv);
    BackwardOptions saved;
    saved.inverse_rms = inv.view();
    const Result own = run_backward(in, c.x, DType::f32);
    const Result from_saved = run_backward(in, c.x, DType::f32, saved);
    EXPECT_TRUE(ref::identical(from_saved.dx.view(), own.dx.view()));
    EXPECT_TRUE(ref::identical(from_saved.dweight.view(), own.dweight.view()));
    expect_b1_b2_b3(in, c.x, saved);
}

INSTANTIATE_TEST_SUITE_P(DtypesShapesGroupings, Training, testing::ValuesIn(training_cases()),
                         [](const testing::TestParamInfo<TrainingCase> &info) { return info.param.name; });

// The inverse RMS is read, not recomputed: a different one gives the formula's dx for it.
TEST(TrainingSaved, AnotherInverseRmsGivesItsOwnGradient) {
    const Inputs in = make_inputs(DType::f32, DType::f32, DType::f32, {16, 64}, 1, 1, GroupingKind::none, 13);
    ref::HostTensor inv;
    run_forward(in, magi2norm::Backend::cpu, DType::f32, &inv);
    for (std::int64_t i = 0; i < inv.size(); ++i) inv.set(i, 2.0f * inv.get(i));
    BackwardOptions saved;
    saved.inverse_rms = inv.view();
    const Result r = run_backward(in, DType::f32, DType::f32, saved);
    const std::vector<float> scale = ref::scale_of(in.weight.view());
    for (std::int64_t row = 0; row < 16; ++row) {
        const double r_inv = inv.get(row);
        double mean = 0;
        for (std::int64_t d = 0; d < 64; ++d) mean += in.dy.get(row * 64 + d) * scale[d] * in.x.get(row * 64 + d) * r_inv;
        mean /= 64;
        for (std::int64_t d = 0; d < 64; ++d) {
            const double g = in.dy.get(row * 64 + d) * scale[d], n = in.x.get(row * 64 + d) * r_inv;
            const double expected = r_inv * (g - n * mean);
            EXPECT_NEAR(r.dx.get(row * 64 + d), expected, 1e-5 + 1e-5 * std::fabs(expected)) << row << ", " << d;
        }
    }
}

// A strided inverse RMS (every other float of a larger buffer): the same values, the gaps untouched,
// and the backward reads it through the same strides.
TEST(TrainingSaved, StridedInverseRms) {
    const Inputs in = make_inputs(DType::bf16, DType::bf16, DType::f32, {24, 3, 64}, 3, 1, GroupingKind::ids, 14);
    ref::HostTensor dense;
    run_forward(in, magi2norm::Backend::cpu, DType::bf16, &dense);
    std::vector<float> memory(2 * 24 * 3, -7.0f);
    const magi2norm::TensorView strided(memory.data(), DType::f32, {24, 3}, {6, 2});
    const RMSNorm norm(in.config, in.weight.view());
    ref::HostTensor out(DType::bf16, in.x.shape());
    CallOptions options;
    options.stream.backend = magi2norm::Backend::cpu;
    options.inverse_rms = strided;
    norm.forward(in.x.view(), in.library_grouping(), out.view(), options);
    for (std::int64_t i = 0; i < 72; ++i) {
        EXPECT_EQ(memory[static_cast<std::size_t>(2 * i)], dense.get(i)) << i;
        EXPECT_EQ(memory[static_cast<std::size_t>(2 * i + 1)], -7.0f) << "gap " << i;
    }
    BackwardOptions saved;
    saved.inverse_rms = magi2norm::ConstTensorView(strided);
    BackwardOptions saved_dense;
    saved_dense.inverse_rms = dense.view();
    const Result a = run_backward(in, DType::bf16, DType::f32, saved), b = run_backward(in, DType::bf16, DType::f32, saved_dense);
    EXPECT_TRUE(ref::identical(a.dx.view(), b.dx.view()));
    EXPECT_TRUE(ref::identical(a.dweight.view(), b.dweight.view()));
}

TEST(TrainingErrors, ForwardRefusesABadInverseRmsAndWritesNothing) {
    const Inputs in = make_inputs(DType::bf16, DType::bf16, DType::f32, {8, 64}, 1, 1, GroupingKind::none, 15);
    const RMSNorm norm(in.config, in.weight.view());
    ref::HostTensor out(DType::bf16, {8, 64});
    std::memset(out.data(), 0xAB, 8 * 64 * 2);
    const ref::HostTensor untouched = out;
    const auto call = [&](magi2norm::TensorView inv) {
        return [&norm, &in, &out, inv] {
            CallOptions options;
            options.stream.backend = magi2norm::Backend::cpu;
            options.inverse_rms = inv;
            norm.forward(in.x.view(), in.library_grouping(), out.view(), options);
        };
    };
    ref::HostTensor bf16(DType::bf16, {8}), short_rows(DType::f32, {7}), rank(DType::f32, {8, 1});
    EXPECT_TRUE(contract::throws_error(call(bf16.view()), ErrorCode::dtype, {"inverse RMS"}));
    EXPECT_TRUE(contract::throws_error(call(short_rows.view()), ErrorCode::shape, {"inverse RMS"}));
    EXPECT_TRUE(contract::throws_error(call(rank.view()), ErrorCode::shape, {"inverse RMS"}));
    EXPECT_TRUE(contract::throws_error(call(magi2norm::TensorView(out.data(), DType::f32, {8})), ErrorCode::overlap, {"inverse RMS"}));
    EXPECT_TRUE(contract::throws_error(call(magi2norm::TensorView(nullptr, DType::f32, {8})), ErrorCode::null_data, {"inverse RMS"}));
    EXPECT_TRUE(ref::identical(out.view(), untouched.view()));
}

TEST(TrainingErrors, BackwardRefusesABadInverseRmsAndWritesNothing) {
    const Inputs in = make_inputs(DType::f32, DType::f32, DType::f32, {8, 64}, 1, 1, GroupingKind::none, 16);
    const RMSNorm norm(in.config, in.weight.view());
    ref::HostTensor dx(DType::f32, {8, 64}), dweight(DType::f32, {64});
    std::memset(dx.data(), 0xAB, 8 * 64 * 4);
    std::memset(dweight.data(), 0xAB, 64 * 4);
    const ref::HostTensor dx_before = dx, dweight_before = dweight;
    const auto call = [&](magi2norm::ConstTensorView inv) {
        return [&, inv] {
            BackwardOptions options;
            options.inverse_rms = inv;
            norm.backward(in.x.view(), in.dy.view(), in.library_grouping(), dx.view(), dweight.view(), options);
        };
    };
    ref::HostTensor f16(DType::f16, {8}), long_rows(DType::f32, {9});
    EXPECT_TRUE(contract::throws_error(call(f16.view()), ErrorCode::dtype, {"inverse RMS"}));
    EXPECT_TRUE(contract::throws_error(call(long_rows.view()), ErrorCode::shape, {"inverse RMS"}));
    EXPECT_TRUE(contract::throws_error(call(magi2norm::ConstTensorView(dx.data(), DType::f32, {8})), ErrorCode::overlap, {"inverse RMS"}));
    EXPECT_TRUE(ref::identical(dx.view(), dx_before.view()));
    EXPECT_TRUE(ref::identical(dweight.view(), dweight_before.view()));
}

}  // namespace
}  // namespace backward_test
