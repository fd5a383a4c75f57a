#include "backward_oracle.hpp"

#include <cmath>

namespace backward_test {

namespace {

// Output rows (token t, head h) and the input row and scale row each reads.
struct RowMap {
    std::int64_t tokens, heads, x_heads;
};

RowMap rows(const Problem &p) {
    if (p.x_shape.size() == 2) return {p.x_shape[0], 1, 1};
    const std::int64_t x_heads = p.x_shape[1];
    const std::int64_t heads = p.num_patterns > 1 ? p.num_patterns : x_heads;
    return {p.x_shape[0], heads, x_heads};
}

std::int64_t modality(const Problem &p, std::int64_t t) { return p.ids.empty() ? 0 : p.ids[t]; }

template <typename F>
void each_row(const Problem &p, F &&f) {
    const RowMap m = rows(p);
    for (std::int64_t t = 0; t < m.tokens; ++t) {
        for (std::int64_t h = 0; h < m.heads; ++h) {
            const std::int64_t x_row = t * m.x_heads + (m.x_heads == 1 ? 0 : h);
            const std::int64_t out_row = t * m.heads + h;
            const std::int64_t pattern = p.num_patterns > 1 ? h : 0;
            const std::int64_t scale_row = modality(p, t) * p.num_patterns + pattern;
            f(x_row, out_row, scale_row);
        }
    }
}

double inverse_rms(const double *x, std::int64_t dim, double eps) {
    double ms = 0;
    for (std::int64_t d = 0; d < dim; ++d) ms += x[d] * x[d];
    return 1.0 / std::sqrt(ms / static_cast<double>(dim) + eps);
}

}  // namespace

ref::Shape output_shape(const Problem &p) {
    ref::Shape s = p.x_shape;
    if (s.size() == 3 && p.num_patterns > 1) s[1] = p.num_patterns;
    return s;
}

Gradients oracle(const Problem &p) {
    const std::int64_t D = p.dim;
    Gradients g;
    g.dx.assign(p.x.size(), 0.0);
    g.dscale.assign(static_cast<std::size_t>(p.num_modality * p.num_patterns * D), 0.0);
    g.dscale_bound = g.dscale;
    each_row(p, [&](std::int64_t xr, std::int64_t orow, std::int64_t sr) {
        const double *x = &p.x[xr * D], *dy = &p.dy[orow * D], *s = &p.scale[sr * D];
        const double r = inverse_rms(x, D, p.eps);
        double mean = 0;
        for (std::int64_t d = 0; d < D; ++d) mean += dy[d] * s[d] * x[d] * r;
        mean /= static_cast<double>(D);
        for (std::int64_t d = 0; d < D; ++d) {
            const double n = x[d] * r;
            g.dx[xr * D + d] += r * (dy[d] * s[d] - n * mean);
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
