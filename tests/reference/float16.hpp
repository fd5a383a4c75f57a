// The two 16-bit float formats of the project, converted to and from FP32 independently of the
// library: FP16 through GCC's _Float16 (IEEE binary16, round to nearest even, subnormals kept),
// BF16 by rounding the FP32 bit pattern by hand.
#pragma once

#include <cstdint>

namespace ref {

float bf16_to_f32(std::uint16_t bits);
// Round to nearest even; NaN stays NaN (made quiet, sign kept), overflow gives +-inf.
std::uint16_t f32_to_bf16(float value);

float f16_to_f32(std::uint16_t bits);
// Round to nearest even over the whole binary16 range, subnormals included.
std::uint16_t f32_to_f16(float value);

}  // namespace ref
