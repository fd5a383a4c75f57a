// The element types of the benchmark's buffers as template parameters (for the hand-written
// scalar peer) and as run-time dtypes (for input data and output checks), on the library's
// public FP32 <-> BF16/FP16 conversions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "magi2norm/float_codecs.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::bench {

// One codec per storage type: decode to float, encode from float.
struct F32 {
    using storage = float;
    static float decode(float v) { return v; }
    static float encode(float v) { return v; }
};

struct BF16 {
    using storage = std::uint16_t;
    static float decode(std::uint16_t v) { return bf16_to_f32(v); }
    static std::uint16_t encode(float f) { return f32_to_bf16(f); }
};

struct F16 {
    using storage = std::uint16_t;
    static float decode(std::uint16_t h) { return f16_to_f32(h); }
    static std::uint16_t encode(float f) { return f32_to_f16(f); }
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
