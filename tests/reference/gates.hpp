// The three numerical gates of SPEC.md, and bit-for-bit identity, as gtest assertions. Each
// compares two views of the same shape element by element (any strides) and, on failure, says how
// many elements fail and shows the first: its index, both values and bit patterns, and the bound.
// NaN equals NaN in every gate.
#pragma once

#include <gtest/gtest.h>

#include "reference/host_tensor.hpp"

namespace ref {

// Gate 1: |actual - expected| <= 1e-6 + 1e-6 * |expected| (FP32 results; infinities must match).
testing::AssertionResult gate1_close(const ConstTensorView &actual, const ConstTensorView &expected);

// Gate 2: a BF16/FP16 output equals, bit for bit, the RNE cast of the same call's FP32 result.
testing::AssertionResult gate2_cast_of_own_f32(const ConstTensorView &low, const ConstTensorView &own_f32);

// Gate 3: a BF16/FP16 output is within one local ULP of the reference output (same dtype), the local
// ULP being the larger spacing from the reference value to its two representable neighbours.
// Infinities must match exactly.
testing::AssertionResult gate3_within_local_ulp(const ConstTensorView &low, const ConstTensorView &reference_low);

// The same dtype, shape and bit pattern in every element (any NaN matching any NaN).
testing::AssertionResult identical(const ConstTensorView &actual, const ConstTensorView &expected);

// The local ULP of a finite BF16/FP16 value given by its bits (exposed for the reference's own tests).
double local_ulp(DType dtype, std::uint16_t bits);

}  // namespace ref
