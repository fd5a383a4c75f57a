// Host-side conversions between FP32 and BF16/FP16 bit patterns, round to nearest even.
// The kernels convert with the same rules (generators/float_codecs.h); these serve the runtime's
// own work on small data: preparing the scale from a BF16/FP16 weight.
#pragma once

#include <cstdint>

namespace magi2norm::detail {

float bf16_to_f32(std::uint16_t bits);
float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_bf16(float value);
std::uint16_t f32_to_f16(float value);

}  // namespace magi2norm::detail
