// BF16 bits <-> FP32 for the demo's synthetic data and its checks. The library's own
// conversions are private, and the checks should not lean on the code they check anyway.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace magi2norm::cli {

inline float bf16_to_f32(std::uint16_t bits) {
    const std::uint32_t u = std::uint32_t{bits} << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// Round to nearest even; NaN stays NaN, overflow rounds to inf.
inline std::uint16_t f32_to_bf16(float value) {
    std::uint32_t u;
    std::memcpy(&u, &value, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

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
