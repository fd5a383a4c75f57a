// The CPU variants add the sum of squares' 16 lane sums (FP64, one per position mod 16) as one
// fixed tree: lane l + lane l + 8, then + 4, + 2, + 1 (generators/, lane_tree). Every CPU form
// (element, paired words, strided) and ISA must use that tree, or a call's bits would depend on
// which variant ran. Most rows cannot tell one order from another, since FP64 sums of FP32
// partials are exact unless the partials span about 29 binary orders of magnitude. These rows
// are built so that the additions round and the FP32 sum lands on the other side of a tie
// unless two small lanes meet each other before they meet lane 0:
//   lane 0: 1 + 1 = 2 (x[0], x[16]);
//   lane 8: 2^-24 + 2^-24 = 2^-23 (x[8], x[24]), half an FP32 ulp of 2, so 2 + 2^-23 is a tie;
//   two small lanes a and b: 2 (1.25 2^-27)^2 = 1.5625 2^-53 each, under half an FP64 ulp of 2,
//   so each is lost when added to 2 alone; their sum (0.78 of an ulp) breaks the tie upwards.
// With the tree the FP32 sum is then 2 + 2^-22, else the tie rounds to even: 2. Row by row the
// small lanes are {1, 3}, {2, 6} and {4, 12}: they meet each other before lane 0 only if the
// tree adds across bit 1 of the lane index before bit 0, bit 2 before bit 1, and bit 3 before
// bit 2, which together leave the one tree above; in position order every row gives 2. The
// expected values come from this file's own emulation of the formula. The GPU variants reduce
// in their own order (their threads stride over the row), so the test is skipped on a GPU
// backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "norm_case.hpp"
#include "reference/float16.hpp"

namespace contract {
namespace {

constexpr std::int64_t kDim = 64;  // one block: 16 lanes of 4 squares each
constexpr int kLanes = 16;
constexpr std::int64_t kRows = 3;

// Row r of the crafted input (see above); its small lanes are {1, 3}, {2, 6} or {4, 12}.
std::vector<float> crafted_row(std::int64_t r) {
    const int small[kRows][2] = {{1, 3}, {2, 6}, {4, 12}};
    std::vector<float> x(kDim, 0.0f);
    x[0] = x[16] = 1.0f;
    x[8] = x[24] = std::ldexp(1.0f, -12);
    for (int lane : small[r]) x[lane] = x[lane + 16] = std::ldexp(1.25f, -27);
    return x;
}

// Lane l's FP32 partial: the squares at l, l + 16, l + 32, l + 48, added left to right.
std::vector<double> lane_partials(const std::vector<float> &x) {
    std::vector<double> lanes(kLanes);
    for (int l = 0; l < kLanes; ++l) {
        float partial = x[l] * x[l];
        for (int k = 1; k < 4; ++k) partial = partial + x[l + 16 * k] * x[l + 16 * k];
        lanes[l] = partial;
    }
    return lanes;
}

double tree_sum(std::vector<double> v) {
    for (std::size_t half = v.size() / 2; half > 0; half /= 2) {
        for (std::size_t l = 0; l < half; ++l) v[l] = v[l] + v[l + half];
        v.resize(half);
    }
    return v[0];
}

double in_order_sum(const std::vector<double> &v) {
    double sum = 0.0;
    for (double lane : v) sum += lane;
    return sum;
}

// SPEC.md's inverse RMS from an FP64 sum, in FP32 as the pipeline computes it (eps = 0).
float inverse_rms(double sum) { return 1.0f / std::sqrt(static_cast<float>(sum) / static_cast<float>(kDim)); }

bool on_cpu() { return magi2norm::default_backend() == magi2norm::Backend::cpu; }

TEST(LaneTree, CpuFormsAddTheLaneSumsAsTheTree) {
    if (!on_cpu()) GTEST_SKIP() << "the GPU schedules reduce the sum of squares in their own order";
    std::vector<std::vector<float>> rows;
    for (std::int64_t r = 0; r < kRows; ++r) rows.push_back(crafted_row(r));
    // Every row tells the orders apart: FP32 sums 2 + 2^-22 and 2, inverses one ulp apart.
    const float tree_inv = inverse_rms(tree_sum(lane_partials(rows[0])));
    const float order_inv = inverse_rms(in_order_sum(lane_partials(rows[0])));
    for (const std::vector<float> &x : rows) {
        ASSERT_EQ(static_cast<float>(tree_sum(lane_partials(x))), 2.0f + std::ldexp(1.0f, -22));
        ASSERT_EQ(static_cast<float>(in_order_sum(lane_partials(x))), 2.0f);
    }
    ASSERT_NE(tree_inv, order_inv);

    // A scale s for position 0 (x = 1) whose BF16 output differs between the two inverses, so
    // the BF16 -> BF16 calls (the paired form among them) show the order too. s in [1, 2): the
    // FP32 weight s - 1 is exact and so is the +1.
    float s = 0.0f;
    for (std::uint32_t k = 0; k < (1u << 23) && s == 0.0f; ++k) {
        const float candidate = 1.0f + std::ldexp(static_cast<float>(k), -23);
        if (ref::f32_to_bf16(tree_inv * candidate) != ref::f32_to_bf16(order_inv * candidate)) s = candidate;
    }
    ASSERT_NE(s, 0.0f) << "no scale in [1, 2) separates the two orders in BF16";
    ref::HostTensor weight(DType::f32, {kDim});
    for (std::int64_t d = 0; d < kDim; ++d) weight.set(d, 0.0f);
    weight.set(0, s - 1.0f);
    const magi2norm::RMSNorm norm({kDim, 0.0f, 1, 1}, weight.view());
    const auto expected_y32 = [&](std::int64_t r, std::int64_t d) { return (rows[r][d] * tree_inv) * (d == 0 ? s : 1.0f); };

    // The rows dense, and with every other element (stride 2 along d: the strided path).
    ref::HostTensor input(DType::bf16, {kRows, kDim});
    ref::HostTensor spread(DType::bf16, {kRows, 2 * kDim});
    for (std::int64_t r = 0; r < kRows; ++r) {
        for (std::int64_t d = 0; d < kDim; ++d) {
            input.set(r * kDim + d, rows[r][d]);
            spread.set(r * 2 * kDim + 2 * d, rows[r][d]);
        }
    }
    const magi2norm::ConstTensorView dense_view(input.data(), DType::bf16, {kRows, kDim});

    // FP32 output (element form, dense and strided): every pre-cast value, bit for bit.
    ref::HostTensor out32(DType::f32, {kRows, kDim}), strided32(DType::f32, {kRows, kDim});
    norm.forward(dense_view, magi2norm::Grouping::none(), out32.view(), DType::f32);
    norm.forward(magi2norm::ConstTensorView(spread.data(), DType::bf16, {kRows, kDim}, {2 * kDim, 2}), magi2norm::Grouping::none(),
                 strided32.view(), DType::f32);

    // BF16 output: paired form from word boundaries, element form two bytes in.
    ref::HostTensor paired(DType::bf16, {kRows, kDim});
    norm.forward(dense_view, magi2norm::Grouping::none(), paired.view());
    EXPECT_TRUE(ran_variant(magi2norm::default_backend(), DType::bf16, DType::bf16, false, true));
    const ref::HostTensor element = forward_off_word_boundary(norm, input, magi2norm::Grouping::none(), {kRows, kDim}, {}, kRows * kDim);
    EXPECT_TRUE(ran_variant(magi2norm::default_backend(), DType::bf16, DType::bf16, false, false));

    for (std::int64_t r = 0; r < kRows; ++r) {
        for (std::int64_t d = 0; d < kDim; ++d) {
            SCOPED_TRACE("row " + std::to_string(r) + ", position " + std::to_string(d));
            const std::int64_t i = r * kDim + d;
            EXPECT_EQ(out32.get(i), expected_y32(r, d));
            EXPECT_EQ(strided32.get(i), expected_y32(r, d));
            const std::uint16_t want = ref::f32_to_bf16(expected_y32(r, d));
            EXPECT_EQ(paired.bits(i), want) << "paired form";
            EXPECT_EQ(element.bits(i), want) << "element form";
        }
    }
}

}  // namespace
}  // namespace contract
