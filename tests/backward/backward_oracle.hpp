// The backward of SPEC.md evaluated in float64 without the library: dx (x's shape) and dscale
// [M][P][D] from x, dy and the weight, with NumPy broadcasting of the [P, D] scale and the
// grouping as per-token modality ids; also the B2 bound sum |dy * n| per dscale element, and the
// float64 forward (for finite differences).
#pragma once

#include <cstdint>
#include <vector>

#include "reference/host_tensor.hpp"

namespace backward_test {

struct Problem {
    std::int64_t dim = 1, num_modality = 1, num_patterns = 1;
    double eps = 1e-6;
    ref::Shape x_shape;             // rank 2 or 3; dy has the forward's output shape
    std::vector<double> x, dy;      // row-major values (dy over the output's shape)
    std::vector<double> scale;      // float32(W(w + 1)) as double, [M][P][D]
    std::vector<std::int32_t> ids;  // per token; empty: all 0
};

struct Gradients {
    std::vector<double> dx, dscale, dscale_bound;
};

// The forward's output shape for x_shape under P patterns (rank 3 inputs [T, H, D] only broadcast).
ref::Shape output_shape(const Problem &p);
Gradients oracle(const Problem &p);
// y = n * scale, float64, over the output shape.
std::vector<double> forward64(const Problem &p);

}  // namespace backward_test
