// SPEC.md's forward, written plainly. Every FP32 step of the formula is an FP32 operation here,
// except the sum of squares: it is accumulated in double (exact squares, error far below FP32's)
// and rounded to float once, which is at least as accurate as any FP32 summation order.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/host_tensor.hpp"

namespace ref {

struct Params {
    std::int64_t dim = 0;
    float eps = 1e-6f;
    std::int64_t num_modality = 1;
    std::int64_t num_patterns = 1;
};

// float32(W(w + 1)) for every weight value in row-major order, W being the weight's dtype: the
// +1 is an FP32 addition, rounded to BF16/FP16 when the weight is one.
std::vector<float> scale_of(const ConstTensorView &weight);

// NumPy broadcasting of x's shape with the scale's: [D] when P == 1, [P, D] otherwise.
// Throws std::invalid_argument when they do not broadcast.
Shape output_shape(const Shape &x_shape, std::int64_t num_patterns);

// The per-token modality of tokens ordered by modality: group m owns sizes[m] tokens.
std::vector<std::int32_t> modality_from_sizes(const std::vector<std::int64_t> &sizes);

// The pre-cast FP32 result y32 (contiguous, output_shape(x.shape, P)). `weight` holds M*P*D values,
// modality-major. `token_modality` gives the modality of every index of x's axis 0; leave it empty
// when M == 1. A broadcast (extent-1) axis of x reads index 0.
HostTensor rms_norm(const Params &params, const ConstTensorView &weight, const ConstTensorView &x,
                    const std::vector<std::int32_t> &token_modality = {});

}  // namespace ref
