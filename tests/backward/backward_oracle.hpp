// The backward of SPEC.md evaluated in float64 without the library: dx (x's shape) and dscale
// [M][P][D] from x, dy and the weight, with NumPy broadcasting of the [P, D] scale and the
// grouping as per-token modality ids; also the B2 bound sum |dy * n| per dscale element, B1's
// term sizes c, and the float64 forward (for finite differences).
#pragma once

#include <cstdint>
#include <vector>

#include "reference/host_tensor.hpp"

namespace backward_test {

struct Problem {
    std::int64_t dim = 1, num_modality = 1, num_patterns = 1;
    double eps = 1e-6;
    ref::Shape x_shape;             // rank >= 2; dy has the forward's output shape
    std::vector<double> x, dy;      // row-major values (dy over the output's shape)
    std::vector<double> scale;      // float32(W(w + 1)) as double, [M][P][D]
    std::vector<std::int32_t> ids;  // per token; empty: all 0
};

struct Gradients {
    std::vector<double> dx, dscale, dscale_bound;
    // B1's c per dx element: r (|g| + |n| mean_d |g n|), summed like dx over the rows it receives.
    std::vector<double> dx_terms;
};

// The forward's output shape for x_shape under P patterns (NumPy broadcasting with [P, D]).
ref::Shape output_shape(const Problem &p);
// A row whose FP32 sum of squares overflows (SPEC.md: as if an element were infinite) has r = 0,
// so n = 0 for its finite elements, and one whose FP32 mean square plus eps is 0 (eps = 0) has
// r = inf; every other step is float64.
Gradients oracle(const Problem &p);
// y = n * scale, float64, over the output shape.
std::vector<double> forward64(const Problem &p);

}  // namespace backward_test
