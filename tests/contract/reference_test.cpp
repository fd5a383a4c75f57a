// The reference and the gate checkers are code too: pin the conversions on hand-worked values
// and show that each gate rejects what it must (and accepts NaN == NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "reference/float16.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"

namespace contract {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Reference, Bf16RoundsToNearestEven) {
    EXPECT_EQ(ref::f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(ref::f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);            // tie, to even
    EXPECT_EQ(ref::f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);            // tie, to even
    EXPECT_EQ(ref::f32_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81); // past the tie
    EXPECT_EQ(ref::f32_to_bf16(0x1.ffp127f), 0x7f80);               // overflow to Inf
    EXPECT_EQ(ref::f32_to_bf16(-kInf), 0xff80);
    EXPECT_EQ(ref::f32_to_bf16(0x3p-134f), 0x0002);                 // subnormal tie
    // A NaN whose payload lives in the low bits must not truncate to Inf.
    std::uint32_t low_payload_nan = 0x7f800001u;
    float nan;
    std::memcpy(&nan, &low_payload_nan, sizeof nan);
    EXPECT_TRUE(std::isnan(ref::bf16_to_f32(ref::f32_to_bf16(nan))));
    EXPECT_EQ(ref::bf16_to_f32(0x4049), 3.140625f);
}

TEST(Reference, F16RoundsToNearestEvenWithSubnormals) {
    EXPECT_EQ(ref::f32_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(ref::f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    EXPECT_EQ(ref::f32_to_f16(65519.0f), 0x7bff);
    EXPECT_EQ(ref::f32_to_f16(65520.0f), 0x7c00);
    EXPECT_EQ(ref::f32_to_f16(0x1p-24f), 0x0001);
    EXPECT_EQ(ref::f32_to_f16(0x1p-25f), 0x0000);
    EXPECT_EQ(ref::f32_to_f16(0x3p-25f), 0x0002);
    EXPECT_TRUE(std::isnan(ref::f16_to_f32(ref::f32_to_f16(kNaN))));
    EXPECT_EQ(ref::f16_to_f32(0x0001), 0x1p-24f);
}

TEST(Reference, LocalUlpIsTheLargerNeighbourSpacing) {
    EXPECT_EQ(ref::local_ulp(ref::DType::bf16, 0x3f80), 0x1p-7);   // 1.0: 2^-8 below, 2^-7 above
    EXPECT_EQ(ref::local_ulp(ref::DType::f16, 0x3c00), 0x1p-10);
    EXPECT_EQ(ref::local_ulp(ref::DType::f16, 0x0000), 0x1p-24);   // zero: the smallest subnormal
    EXPECT_EQ(ref::local_ulp(ref::DType::f16, 0xfbff), 32.0);      // -65504: its finite neighbour
}

TEST(Reference, ScaleRoundsThePlusOneInTheWeightDtype) {
    // w = 2^-8 + 2^-15 is a BF16 value; w + 1 is not, and lies past the tie 1 + 2^-8, so the
    // scale is 1 + 2^-7 rather than FP32's 1 + 2^-8 + 2^-15.
    ref::HostTensor weight(ref::DType::bf16, {1});
    weight.set(0, 0x1p-8f + 0x1p-15f);
    EXPECT_EQ(ref::scale_of(weight.view()), std::vector<float>{1.0f + 0x1p-7f});
}

// The reference never applies the stride of an axis of extent 1, however large: a view with
// INT64_MAX there reads as the dense one, in its copy and in its norm.
TEST(Reference, ExtentOneAxesIgnoreTheirStride) {
    ref::HostTensor x(ref::DType::f32, {1, 3, 4});
    for (std::int64_t i = 0; i < x.size(); ++i) x.set(i, static_cast<float>(i) - 5.5f);
    const std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    const ref::ConstTensorView odd(x.data(), ref::DType::f32, {1, 3, 4}, {kMax, 4, 1});
    EXPECT_TRUE(ref::identical(ref::HostTensor::copy_of(odd).view(), x.view()));
    ref::HostTensor weight(ref::DType::f32, {4});
    const ref::Params params{4, 1e-6f, 1, 1};
    EXPECT_TRUE(ref::identical(ref::rms_norm(params, weight.view(), odd).view(), ref::rms_norm(params, weight.view(), x.view()).view()));
    // A row of one element (D = 1): the d axis's stride is never applied either.
    const ref::ConstTensorView column(x.data(), ref::DType::f32, {12, 1}, {1, -kMax});
    ref::HostTensor dense(ref::DType::f32, {12, 1});
    for (std::int64_t i = 0; i < 12; ++i) dense.set(i, x.get(i));
    ref::HostTensor one(ref::DType::f32, {1});
    EXPECT_TRUE(ref::identical(ref::rms_norm({1, 1e-6f, 1, 1}, one.view(), column).view(),
                               ref::rms_norm({1, 1e-6f, 1, 1}, one.view(), dense.view()).view()));
}

ref::HostTensor filled(ref::DType dtype, float value) {
    ref::HostTensor tensor(dtype, {2, 3});
    for (std::int64_t i = 0; i < tensor.size(); ++i) tensor.set(i, value);
    return tensor;
}

TEST(Reference, Gate1) {
    ref::HostTensor a = filled(ref::DType::f32, 100.0f), b = filled(ref::DType::f32, 100.0f);
    a.set(4, kNaN);
    b.set(4, kNaN);
    EXPECT_TRUE(ref::gate1_close(a.view(), b.view()));   // NaN == NaN
    a.set(2, 100.0f + 2e-4f);
    EXPECT_FALSE(ref::gate1_close(a.view(), b.view()));  // 2e-4 > 1e-6 + 1e-4
    a.set(2, kInf);
    EXPECT_FALSE(ref::gate1_close(a.view(), b.view()));
}

TEST(Reference, Gate2) {
    const ref::HostTensor low = filled(ref::DType::bf16, 100.0f);  // BF16 spacing at 100 is 0.5
    ref::HostTensor own = filled(ref::DType::f32, 100.0f);
    own.set(0, 100.25f);  // the tie between 100 and 100.5: to even, 100
    EXPECT_TRUE(ref::gate2_cast_of_own_f32(low.view(), own.view()));
    own.set(0, 100.3f);   // rounds to 100.5
    EXPECT_FALSE(ref::gate2_cast_of_own_f32(low.view(), own.view()));
}

TEST(Reference, Gate3) {
    const ref::HostTensor reference = filled(ref::DType::bf16, 100.0f);
    ref::HostTensor low = filled(ref::DType::bf16, 100.0f);
    low.set(3, 100.5f);  // one local ULP away
    EXPECT_TRUE(ref::gate3_within_local_ulp(low.view(), reference.view()));
    low.set(3, 101.0f);  // two
    EXPECT_FALSE(ref::gate3_within_local_ulp(low.view(), reference.view()));
}

}  // namespace
}  // namespace contract
