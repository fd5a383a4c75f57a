#include "reference/float16.hpp"

#include <cstring>
#include <vector>

namespace ref {
namespace {

std::uint32_t bits_of(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

float float_of(std::uint32_t bits) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

}  // namespace

float bf16_to_f32(std::uint16_t bits) { return float_of(std::uint32_t{bits} << 16); }

std::uint16_t f32_to_bf16(float value) {
    const std::uint32_t bits = bits_of(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        // Truncating a NaN could clear every mantissa bit left and give an Inf: set the quiet bit.
        return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
    }
    // Adding 0x7fff rounds halfway cases up; the kept LSB adds one more exactly when that LSB is
    // odd, which turns "ties up" into "ties to even". A carry into the exponent is the correct
    // result too (up to the next binade, or to Inf past the largest finite value).
    const std::uint32_t lsb = (bits >> 16) & 1u;
    return static_cast<std::uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

float f16_to_f32(std::uint16_t bits) {
    // Widening is exact, so a table filled once by _Float16 gives the same values, without a
    // soft-float library call per element (the tests decode tens of millions of elements).
    static const std::vector<float> table = [] {
        std::vector<float> values(1u << 16);
        for (std::uint32_t b = 0; b < values.size(); ++b) {
            const auto narrow = static_cast<std::uint16_t>(b);
            _Float16 half;
            std::memcpy(&half, &narrow, sizeof half);
            values[b] = static_cast<float>(half);
        }
        return values;
    }();
    return table[bits];
}

std::uint16_t f32_to_f16(float value) {
    const _Float16 half = static_cast<_Float16>(value);
    std::uint16_t bits;
    std::memcpy(&bits, &half, sizeof bits);
    return bits;
}

}  // namespace ref
