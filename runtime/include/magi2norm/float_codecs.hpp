// FP32 <-> BF16/FP16 bit patterns on the host: for a host that makes or reads BF16/FP16 tensors
// next to the norm, and for the library's own small work (the scale from a BF16/FP16 weight).
// The kernels round with the same rules: to nearest even over the whole range, subnormals
// included; overflow rounds to infinity; NaN stays NaN (BF16 keeps the sign and the top payload
// bits and sets the quiet bit; FP16 gives the quiet NaN 0x7e00 with the sign).
// Inline, so that a caller's loop over elements is not a loop of calls.
#pragma once

#include <cstdint>
#include <cstring>

namespace magi2norm {

namespace detail {

inline std::uint32_t f32_bits(float value) {
    std::uint32_t u;
    std::memcpy(&u, &value, sizeof u);
    return u;
}

inline float f32_from_bits(std::uint32_t u) {
    float value;
    std::memcpy(&value, &u, sizeof value);
    return value;
}

}  // namespace detail

inline float bf16_to_f32(std::uint16_t bits) { return detail::f32_from_bits(std::uint32_t{bits} << 16); }

inline std::uint16_t f32_to_bf16(float value) {
    const std::uint32_t u = detail::f32_bits(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float f16_to_f32(std::uint16_t bits) {
    const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1fu;
    const std::uint32_t mantissa = bits & 0x3ffu;
    if (exponent == 0) {
        const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // exact
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return detail::f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
    return detail::f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline std::uint16_t f32_to_f16(float value) {
    const std::uint32_t u = detail::f32_bits(value);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7fffffffu;
    std::uint32_t magnitude;
    if (a > 0x7f800000u) {
        magnitude = 0x7e00u;
    } else if (a >= 0x477ff000u) {  // 65520 and above round to infinity
        magnitude = 0x7c00u;
    } else if (a < 0x38800000u) {
        // FP16 subnormal or zero: adding 0.5 (whose unit in the last place is 2^-24) rounds the
        // value to whole units of 2^-24, to nearest even in the default floating-point mode.
        magnitude = detail::f32_bits(detail::f32_from_bits(a) + 0.5f) - 0x3f000000u;
    } else {
        // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even; a carry
        // out of the mantissa correctly bumps the exponent.
        const std::uint32_t rebiased = a - 0x38000000u;
        magnitude = (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
    }
    return static_cast<std::uint16_t>(sign | magnitude);
}

}  // namespace magi2norm
