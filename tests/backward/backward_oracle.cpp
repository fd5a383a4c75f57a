#include "backward_oracle.hpp"

#include <cmath>
#include <limits>

#include "reference/reference.hpp"

namespace backward_test {

namespace {

std::int64_t modality(const Problem &p, std::int64_t t) { return p.ids.empty() ? 0 : p.ids[t]; }

// Calls f(x_row, out_row, scale_row) for every output row: the input row it reads (x's extent-1
// axes broadcast) and the scale row (the token's modality; the pattern is the output's
// second-to-last index when P > 1).
template <typename F>
void each_row(const Problem &p, F &&f) {
    const ref::Shape out = output_shape(p);
    const std::size_t rank = out.size();
    const ref::Shape row_shape(out.begin(), out.end() - 1);
    const ref::Shape x_rows(p.x_shape.begin(), p.x_shape.end() - 1);
    const ref::Shape x_row_strides = ref::row_major_strides(x_rows);
    std::int64_t out_row = 0;
    ref::for_each_index(row_shape, [&](const ref::Shape &index) {
        std::int64_t x_row = 0;
        for (std::size_t k = 0; k < x_rows.size(); ++k) {
            if (x_rows[k] != 1) x_row += index[k] * x_row_strides[k];
        }
        const std::int64_t pattern = p.num_patterns > 1 ? index[rank - 2] : 0;
        const std::int64_t token = p.x_shape[0] == 1 ? 0 : index[0];
        f(x_row, out_row++, modality(p, token) * p.num_patterns + pattern);
    });
}

double inverse_rms(const double *x, std::int64_t dim, double eps) {
    double ms = 0;
    for (std::int64_t d = 0; d < dim; ++d) ms += x[d] * x[d];
    if (std::isinf(static_cast<float>(ms))) return 0.0;  // FP32's sum of squares overflows
    const double ms_eps = ms / static_cast<double>(dim) + eps;
    if (static_cast<float>(ms_eps) == 0.0f) return INFINITY;  // with eps = 0, FP32's mean square underflows
    return 1.0 / std::sqrt(ms_eps);
}

}  // namespace

ref::Shape output_shape(const Problem &p) { return ref::output_shape(p.x_shape, p.num_patterns); }

Gradients oracle(const Problem &p) {
    const std::int64_t D = p.dim;
    Gradients g;
    g.dx.assign(p.x.size(), 0.0);
    g.dx_terms = g.dx;
    g.dscale.assign(static_cast<std::size_t>(p.num_modality * p.num_patterns * D), 0.0);
    g.dscale_bound = g.dscale;
    each_row(p, [&](std::int64_t xr, std::int64_t orow, std::int64_t sr) {
        const double *x = &p.x[xr * D], *dy = &p.dy[orow * D], *s = &p.scale[sr * D];
        const double r = inverse_rms(x, D, p.eps);
        double mean = 0, mean_abs = 0;
        for (std::int64_t d = 0; d < D; ++d) {
            const double gn = dy[d] * s[d] * (x[d] * r);
            mean += gn;
            mean_abs += std::fabs(gn);
        }
        mean /= static_cast<double>(D);
        mean_abs /= static_cast<double>(D);
        for (std::int64_t d = 0; d < D; ++d) {
            const double n = x[d] * r, gd = dy[d] * s[d];
            g.dx[xr * D + d] += r * (gd - n * mean);
            g.dx_terms[xr * D + d] += r * (std::fabs(gd) + std::fabs(n) * mean_abs);
            g.dscale[sr * D + d] += dy[d] * n;
            g.dscale_bound[sr * D + d] += std::fabs(dy[d] * n);
        }
    });
    return g;
}

std::vector<double> forward64(const Problem &p) {
    const std::int64_t D = p.dim;
    std::vector<double> y(p.dy.size());
    each_row(p, [&](std::int64_t xr, std::int64_t orow, std::int64_t sr) {
        const double r = inverse_rms(&p.x[xr * D], D, p.eps);
        for (std::int64_t d = 0; d < D; ++d) y[orow * D + d] = p.x[xr * D + d] * r * p.scale[sr * D + d];
    });
    return y;
}

}  // namespace backward_test
