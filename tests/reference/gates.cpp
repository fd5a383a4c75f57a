#include "reference/gates.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "reference/float16.hpp"

namespace ref {
namespace {

struct Element {
    DType dtype;
    float value;
    std::uint32_t bits;
};

std::string describe(const Element &e) {
    const char *name = e.dtype == DType::f32 ? "f32" : e.dtype == DType::bf16 ? "bf16" : "f16";
    char text[96];
    std::snprintf(text, sizeof text, "%.9g (%s 0x%0*x)", static_cast<double>(e.value), name,
                  e.dtype == DType::f32 ? 8 : 4, static_cast<unsigned>(e.bits));
    return text;
}

std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", value);
    return text;
}

std::uint16_t rne_bits(DType dtype, float value) {
    return dtype == DType::bf16 ? f32_to_bf16(value) : f32_to_f16(value);
}

// The verdict when either value is NaN or infinite (NaN matches NaN, an infinity only itself);
// nullopt when both are finite and the gate's bound decides.
std::optional<bool> special_values(const Element &actual, const Element &expected) {
    const bool a_nan = std::isnan(actual.value), e_nan = std::isnan(expected.value);
    if (a_nan || e_nan) return a_nan == e_nan;
    if (std::isinf(actual.value) || std::isinf(expected.value)) return actual.value == expected.value;
    return std::nullopt;
}

std::string special_values_reason(const Element &actual, const Element &expected) {
    return std::isnan(actual.value) || std::isnan(expected.value) ? "exactly one of them is NaN"
                                                                  : "infinities must match exactly";
}

// `passes(actual, expected)` decides each pair; `explain(actual, expected)` says why the first
// failing pair fails.
template <typename Passes, typename Explain>
testing::AssertionResult compare(const char *gate, const ConstTensorView &actual, const ConstTensorView &expected,
                                 Passes passes, Explain explain) {
    if (actual.shape != expected.shape) {
        return testing::AssertionFailure() << gate << ": shape " << format_shape(actual.shape) << " != expected "
                                           << format_shape(expected.shape);
    }
    const ViewReader a(actual), e(expected);
    std::int64_t failures = 0;
    std::string first;
    for_each_offset_pair(actual.shape, a.strides(), e.strides(), [&](std::int64_t flat, std::int64_t oa, std::int64_t oe) {
        const Element ea{actual.dtype, a.value_at(oa), load_bits(actual.dtype, actual.data, oa)};
        const Element ee{expected.dtype, e.value_at(oe), load_bits(expected.dtype, expected.data, oe)};
        if (passes(ea, ee)) return;
        if (failures++ == 0) {
            first = "first at " + format_shape(unravel(flat, actual.shape)) + ": actual " + describe(ea) +
                    ", expected " + describe(ee) + ": " + explain(ea, ee);
        }
    });
    if (failures == 0) return testing::AssertionSuccess();
    return testing::AssertionFailure() << gate << ": " << failures << " of " << num_elements(actual.shape)
                                       << " elements of " << format_shape(actual.shape) << " fail; " << first;
}

bool is_low(DType dtype) { return dtype != DType::f32; }

testing::AssertionResult need_low(const char *gate, const ConstTensorView &low) {
    if (is_low(low.dtype)) return testing::AssertionSuccess();
    return testing::AssertionFailure() << gate << ": the output is not BF16/FP16";
}

}  // namespace

double local_ulp(DType dtype, std::uint16_t bits) {
    const auto value = [dtype](std::uint32_t magnitude) {
        const auto b = static_cast<std::uint16_t>(magnitude);
        return static_cast<double>(dtype == DType::bf16 ? bf16_to_f32(b) : f16_to_f32(b));
    };
    // Neighbours are symmetric in the sign, so work on the magnitude. Zero's lower neighbour is
    // the smallest negative subnormal; the largest finite value's upper one is Inf, not a spacing.
    const std::uint32_t magnitude = bits & 0x7fffu;
    const std::uint32_t inf_bits = dtype == DType::bf16 ? 0x7f80u : 0x7c00u;
    const double below = magnitude == 0 ? value(1) : value(magnitude) - value(magnitude - 1);
    const double above = magnitude + 1 < inf_bits ? value(magnitude + 1) - value(magnitude) : 0.0;
    return std::max(below, above);
}

testing::AssertionResult gate1_close(const ConstTensorView &actual, const ConstTensorView &expected) {
    const auto bound = [](const Element &e) { return 1e-6 + 1e-6 * std::fabs(static_cast<double>(e.value)); };
    const auto diff = [](const Element &a, const Element &e) { return std::fabs(static_cast<double>(a.value) - e.value); };
    return compare(
        "gate 1 (FP32 within 1e-6 + 1e-6*|expected|)", actual, expected,
        [&](const Element &a, const Element &e) {
            if (auto verdict = special_values(a, e)) return *verdict;
            return diff(a, e) <= bound(e);
        },
        [&](const Element &a, const Element &e) {
            if (special_values(a, e)) return special_values_reason(a, e);
            return "|diff| " + number(diff(a, e)) + " > " + number(bound(e));
        });
}

testing::AssertionResult gate2_cast_of_own_f32(const ConstTensorView &low, const ConstTensorView &own_f32) {
    const char *gate = "gate 2 (bit-exact RNE cast of the call's own FP32 result)";
    if (auto ok = need_low(gate, low); !ok) return ok;
    return compare(
        gate, low, own_f32,
        [](const Element &a, const Element &e) {
            if (std::isnan(e.value)) return std::isnan(a.value);
            return a.bits == rne_bits(a.dtype, e.value);
        },
        [](const Element &a, const Element &e) -> std::string {
            if (std::isnan(e.value)) return "the FP32 result is NaN";
            char text[48];
            std::snprintf(text, sizeof text, "its RNE cast is 0x%04x", static_cast<unsigned>(rne_bits(a.dtype, e.value)));
            return text;
        });
}

testing::AssertionResult gate3_within_local_ulp(const ConstTensorView &low, const ConstTensorView &reference_low) {
    const char *gate = "gate 3 (within one local ULP of the reference)";
    if (auto ok = need_low(gate, low); !ok) return ok;
    if (low.dtype != reference_low.dtype) return testing::AssertionFailure() << gate << ": dtypes differ";
    const auto diff = [](const Element &a, const Element &e) { return std::fabs(static_cast<double>(a.value) - e.value); };
    const auto ulp = [](const Element &e) { return local_ulp(e.dtype, static_cast<std::uint16_t>(e.bits)); };
    return compare(
        gate, low, reference_low,
        [&](const Element &a, const Element &e) {
            if (auto verdict = special_values(a, e)) return *verdict;
            return diff(a, e) <= ulp(e);
        },
        [&](const Element &a, const Element &e) {
            if (special_values(a, e)) return special_values_reason(a, e);
            return "|diff| " + number(diff(a, e)) + " > local ULP " + number(ulp(e));
        });
}

testing::AssertionResult identical(const ConstTensorView &actual, const ConstTensorView &expected) {
    if (actual.dtype != expected.dtype) return testing::AssertionFailure() << "identical: dtypes differ";
    return compare(
        "identical", actual, expected,
        [](const Element &a, const Element &e) {
            return a.bits == e.bits || (std::isnan(a.value) && std::isnan(e.value));
        },
        [](const Element &, const Element &) { return std::string("bit patterns differ"); });
}

}  // namespace ref
