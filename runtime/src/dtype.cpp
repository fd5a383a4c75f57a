// DType names and sizes, and the host-side FP32 <-> BF16/FP16 conversions.
#include <cstring>

#include "float_bits.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

const char *dtype_name(DType dtype) {
    switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    }
    return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
    if (name == "f32" || name == "float32" || name == "F32" || name == "float") return DType::f32;
    if (name == "bf16" || name == "bfloat16" || name == "BF16") return DType::bf16;
    if (name == "f16" || name == "float16" || name == "half" || name == "F16") return DType::f16;
    return std::nullopt;
}

std::size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

namespace detail {

namespace {
std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
float float_of(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
}  // namespace

float bf16_to_f32(std::uint16_t bits) { return float_of(std::uint32_t{bits} << 16); }

float f16_to_f32(std::uint16_t bits) {
    const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1fu;
    const std::uint32_t mantissa = bits & 0x3ffu;
    if (exponent == 0) {
        const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return float_of(sign | 0x7f800000u | (mantissa << 13));
    return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::uint16_t f32_to_bf16(float value) {
    const std::uint32_t u = bits_of(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

std::uint16_t f32_to_f16(float value) {
    const std::uint32_t u = bits_of(value);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7fffffffu;
    std::uint32_t magnitude;
    if (a > 0x7f800000u) {
        magnitude = 0x7e00u;
    } else if (a >= 0x477ff000u) {
        magnitude = 0x7c00u;
    } else if (a < 0x38800000u) {
        // The FP32 add rounds the value, in units of 2^-24, to nearest even.
        magnitude = bits_of(float_of(a) + 0.5f) - 0x3f000000u;
    } else {
        const std::uint32_t rebiased = a - 0x38000000u;
        magnitude = (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
    }
    return static_cast<std::uint16_t>(sign | magnitude);
}

}  // namespace detail
}  // namespace magi2norm
