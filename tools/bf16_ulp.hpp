// The tolerance of the demo's BF16 output check: one BF16 unit in the last place around a value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "magi2norm/float_codecs.hpp"

namespace magi2norm::cli {

// The larger distance from the finite BF16 value `bits` to its two representable neighbours.
inline float bf16_local_ulp(std::uint16_t bits) {
    const float value = bf16_to_f32(bits);
    // Adding one to the magnitude bits moves away from zero; at zero, the neighbours are the
    // smallest subnormals of either sign, both one step away.
    const std::uint16_t magnitude = bits & 0x7fffu;
    const float away = bf16_to_f32(static_cast<std::uint16_t>(bits + 1));
    const float toward = magnitude == 0 ? away : bf16_to_f32(static_cast<std::uint16_t>(bits - 1));
    return std::max(std::fabs(away - value), std::fabs(value - toward));
}

}  // namespace magi2norm::cli
