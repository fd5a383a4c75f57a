#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "reference/float16.hpp"

namespace ref {
namespace {

float round_to(DType dtype, float value) {
    switch (dtype) {
    case DType::f32: return value;
    case DType::bf16: return bf16_to_f32(f32_to_bf16(value));
    case DType::f16: return f16_to_f32(f32_to_f16(value));
    }
    throw std::logic_error("unknown dtype");
}

}  // namespace

std::vector<float> scale_of(const ConstTensorView &weight) {
    const ViewReader reader(weight);
    std::vector<float> scale;
    scale.reserve(static_cast<std::size_t>(num_elements(weight.shape)));
    for_each_index(weight.shape, [&](const Shape &index) {
        const float plus_one = reader.value(index) + 1.0f;
        scale.push_back(round_to(weight.dtype, plus_one));
    });
    return scale;
}

Shape output_shape(const Shape &x_shape, std::int64_t num_patterns) {
    if (x_shape.empty()) throw std::invalid_argument("reference: rank-0 input");
    const Shape scale_shape = num_patterns == 1 ? Shape{x_shape.back()} : Shape{num_patterns, x_shape.back()};
    const std::size_t rank = std::max(x_shape.size(), scale_shape.size());
    Shape out(rank);
    for (std::size_t k = 0; k < rank; ++k) {
        // Trailing axes align; a missing axis counts as extent 1.
        const std::size_t from_end = rank - 1 - k;
        const std::int64_t a = from_end < x_shape.size() ? x_shape[x_shape.size() - 1 - from_end] : 1;
        const std::int64_t b = from_end < scale_shape.size() ? scale_shape[scale_shape.size() - 1 - from_end] : 1;
        if (a != b && a != 1 && b != 1) {
            throw std::invalid_argument("reference: " + format_shape(x_shape) + " does not broadcast with " +
                                        format_shape(scale_shape));
        }
        out[k] = a == 1 ? b : a;
    }
    return out;
}

std::vector<std::int32_t> modality_from_sizes(const std::vector<std::int64_t> &sizes) {
    std::vector<std::int32_t> modality;
    for (std::size_t m = 0; m < sizes.size(); ++m) modality.insert(modality.end(), sizes[m], static_cast<std::int32_t>(m));
    return modality;
}

HostTensor rms_norm(const Params &params, const ConstTensorView &weight, const ConstTensorView &x,
                    const std::vector<std::int32_t> &token_modality) {
    const std::int64_t D = params.dim, P = params.num_patterns;
    if (x.shape.empty() || x.shape.back() != D) throw std::invalid_argument("reference: last axis is not D");
    const std::vector<float> scale = scale_of(weight);
    if (static_cast<std::int64_t>(scale.size()) != params.num_modality * P * D) {
        throw std::invalid_argument("reference: weight size is not M*P*D");
    }
    if (params.num_modality > 1 &&
        (x.shape.size() < 2 || static_cast<std::int64_t>(token_modality.size()) != x.shape[0])) {
        throw std::invalid_argument("reference: M > 1 needs one modality per token");
    }
    for (std::int32_t m : token_modality) {
        if (m < 0 || m >= params.num_modality) throw std::invalid_argument("reference: modality id out of range");
    }

    HostTensor y(DType::f32, output_shape(x.shape, P));
    const Shape &out_shape = y.shape();
    const std::size_t rank = out_shape.size(), x_rank = x.shape.size(), lead = rank - x_rank;
    const Shape row_shape(out_shape.begin(), out_shape.end() - 1);
    const ViewReader reader(x);
    const std::int64_t x_d_stride = reader.strides().back();
    std::vector<float> xf(static_cast<std::size_t>(D));
    std::int64_t out_offset = 0;

    for_each_index(row_shape, [&](const Shape &row) {
        // Where this output row reads x (extent-1 axes of x broadcast), and which scale row applies.
        std::int64_t x_offset = 0;
        for (std::size_t k = 0; k + 1 < x_rank; ++k) {
            if (x.shape[k] != 1) x_offset += row[k + lead] * reader.strides()[k];
        }
        const std::int64_t pattern = P == 1 ? 0 : row[rank - 2];
        const std::int64_t modality =
            params.num_modality == 1 ? 0 : token_modality[static_cast<std::size_t>(x.shape[0] == 1 ? 0 : row[0])];
        const float *scale_row = scale.data() + (modality * P + pattern) * D;

        double sum_of_squares = 0.0;
        for (std::int64_t d = 0; d < D; ++d) {
            xf[d] = reader.value_at(x_offset + d * x_d_stride);
            sum_of_squares += static_cast<double>(xf[d]) * static_cast<double>(xf[d]);
        }
        const float ms = static_cast<float>(sum_of_squares) / static_cast<float>(D);
        const float inv = 1.0f / std::sqrt(ms + params.eps);
        for (std::int64_t d = 0; d < D; ++d) y.set(out_offset + d, (xf[d] * inv) * scale_row[d]);
        out_offset += D;
    });
    return y;
}

}  // namespace ref
