// Scalar FP32 <-> BF16/FP16 conversions, written the way a C++ developer writes them by hand
// (bit manipulation, round-to-nearest-even). The benchmark uses them to make input data, to
// check outputs, and in the hand-written scalar peer; the library has its own, not public.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::bench {

inline std::uint32_t float_bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float bits_float(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// One codec per storage type: decode to float, encode from float.
struct F32 {
    using storage = float;
    static float decode(float v) { return v; }
    static float encode(float v) { return v; }
};

struct BF16 {
    using storage = std::uint16_t;
    static float decode(std::uint16_t v) { return bits_float(static_cast<std::uint32_t>(v) << 16); }
    // Round to nearest even on the 16 dropped bits; NaN is kept quiet rather than rounded to Inf.
    static std::uint16_t encode(float f) {
        const std::uint32_t u = float_bits(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
        return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
};

struct F16 {
    using storage = std::uint16_t;
    static float decode(std::uint16_t h) {
        const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
        const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
        if (exponent == 0) {
            const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
            return sign ? -magnitude : magnitude;
        }
        if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
        return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
    }
    static std::uint16_t encode(float f) {
        const std::uint32_t u = float_bits(f);
        const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
        const std::uint32_t magnitude = u & 0x7fffffffu;
        if (magnitude > 0x7f800000u) return sign | 0x7e00u;      // NaN
        if (magnitude >= 0x477ff000u) return sign | 0x7c00u;     // rounds to Inf (>= 65520)
        if (magnitude < 0x38800000u) {                            // FP16 subnormal or zero
            const float scaled = std::fabs(f) * 16777216.0f;     // exact: a power of two
            return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
        }
        // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even; a
        // carry out of the mantissa correctly bumps the exponent.
        const std::uint32_t rebased = magnitude - (112u << 23);
        return sign | static_cast<std::uint16_t>((rebased + 0x0fffu + ((rebased >> 13) & 1u)) >> 13);
    }
};

// Element i of a buffer of `dtype`, as float.
inline float decode(DType dtype, const void *data, std::size_t i) {
    switch (dtype) {
    case DType::bf16: return BF16::decode(static_cast<const std::uint16_t *>(data)[i]);
    case DType::f16: return F16::decode(static_cast<const std::uint16_t *>(data)[i]);
    default: return static_cast<const float *>(data)[i];
    }
}

// Stores `value` as element i of a buffer of `dtype`.
inline void encode(DType dtype, void *data, std::size_t i, float value) {
    switch (dtype) {
    case DType::bf16: static_cast<std::uint16_t *>(data)[i] = BF16::encode(value); break;
    case DType::f16: static_cast<std::uint16_t *>(data)[i] = F16::encode(value); break;
    default: static_cast<float *>(data)[i] = value; break;
    }
}

// Significand bits of `dtype` (without the implicit one): the precision an output check allows.
inline int mantissa_bits(DType dtype) { return dtype == DType::bf16 ? 7 : dtype == DType::f16 ? 10 : 23; }

}  // namespace magi2norm::bench
