#include "row_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "bf16_ulp.hpp"
#include "magi2norm/float_codecs.hpp"

namespace magi2norm::cli {
namespace {

float load(const void *base, DType dtype, std::int64_t index) {
    if (dtype == DType::bf16) {
        std::uint16_t bits;
        std::memcpy(&bits, static_cast<const unsigned char *>(base) + 2 * index, 2);
        return bf16_to_f32(bits);
    }
    float value;
    std::memcpy(&value, static_cast<const unsigned char *>(base) + 4 * index, 4);
    return value;
}

// float32(W(w + 1)): the +1 is rounded to the weight's own dtype.
float scale_of(const DemoCase &c, const DemoData &data, std::int64_t index) {
    const float w = load(data.weight.data(), c.weight_dtype, index);
    return c.weight_dtype == DType::bf16 ? bf16_to_f32(f32_to_bf16(w + 1.0f)) : w + 1.0f;
}

// SPEC.md's row formula in FP32. The sum of squares is accumulated in double and rounded once,
// so the reference is the most accurate FP32 value rather than one particular summation order.
void reference_row(const float *x, const float *scale, std::int64_t dim, float eps, float *y) {
    double sum = 0;
    for (std::int64_t d = 0; d < dim; ++d) sum += static_cast<double>(x[d]) * x[d];
    const float ms = static_cast<float>(sum) / static_cast<float>(dim);
    const float inv = 1.0f / std::sqrt(ms + eps);
    for (std::int64_t d = 0; d < dim; ++d) y[d] = (x[d] * inv) * scale[d];
}

struct Gate {
    bool pass;
    double err;
};

Gate compare(DType out_dtype, float actual, float expected) {
    if (out_dtype == DType::f32) {
        const double err = std::fabs(static_cast<double>(actual) - expected);
        return {err <= 1e-6 + 1e-6 * std::fabs(expected), err};
    }
    const std::uint16_t expected_bits = f32_to_bf16(expected);
    const float rounded = bf16_to_f32(expected_bits);
    const double err = std::fabs(static_cast<double>(actual) - rounded);
    return {err <= bf16_local_ulp(expected_bits), err};
}

}  // namespace

CheckResult check_sampled_rows(const DemoCase &c, const DemoData &data, const void *out, int sample_tokens) {
    const std::int64_t tokens = c.shape.front(), dim = c.shape.back();
    const std::int64_t rows_per_token = element_count(c.shape) / std::max<std::int64_t>(1, tokens * dim);
    std::set<std::int64_t> sampled;
    for (int i = 0; i < sample_tokens && tokens > 0; ++i) sampled.insert(i * (tokens - 1) / std::max(1, sample_tokens - 1));

    CheckResult result;
    std::vector<float> x(dim), scale(dim), y(dim);
    for (const std::int64_t token : sampled) {
        const std::int64_t scale_row = data.modality(token) * dim;
        for (std::int64_t d = 0; d < dim; ++d) scale[d] = scale_of(c, data, scale_row + d);
        for (std::int64_t r = token * rows_per_token; r < (token + 1) * rows_per_token; ++r) {
            for (std::int64_t d = 0; d < dim; ++d) x[d] = load(data.x.data(), c.in_dtype, r * dim + d);
            reference_row(x.data(), scale.data(), dim, c.eps, y.data());
            for (std::int64_t d = 0; d < dim; ++d) {
                const Gate gate = compare(c.out_dtype, load(out, c.out_dtype, r * dim + d), y[d]);
                result.pass = result.pass && gate.pass;
                result.max_abs_err = std::max(result.max_abs_err, gate.err);
            }
        }
    }
    return result;
}

}  // namespace magi2norm::cli
