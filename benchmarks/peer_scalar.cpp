// The peer a C++ developer writes by hand: loop over rows, sum the squares in float, one
// 1/sqrt, multiply by the (w + 1) row of the token's modality, convert with a simple BF16/FP16
// routine. Single-threaded, compiled with the project's flags, no intrinsics.
#include <cmath>

#include "float_codec.hpp"
#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

template <class In, class Out>
void scalar_norm(const Workspace &ws, const void *x_data, void *y_data) {
    const Case &c = ws.spec();
    const auto *x = static_cast<const typename In::storage *>(x_data);
    auto *y = static_cast<typename Out::storage *>(y_data);
    const std::int64_t dim = c.dim(), rows = c.rows_per_token();
    // (w + 1) per modality, rounded to BF16 as the model's BF16 parameter arithmetic does:
    // hoisted out of the loop once, as anyone would.
    const float *scale = ws.scale().data();
    const std::vector<std::int64_t> &sizes = ws.group_sizes();
    const std::int32_t *ids = ws.token_ids().empty() ? nullptr : ws.token_ids().data();

    std::int64_t modality = 0, group_end = sizes[0];
    for (std::int64_t t = 0; t < c.tokens; ++t) {
        if (ids) {
            modality = ids[t];
        } else {
            while (t >= group_end) group_end += sizes[static_cast<std::size_t>(++modality)];
        }
        const float *w = scale + modality * dim;
        for (std::int64_t row = t * rows; row < (t + 1) * rows; ++row) {
            const auto *xr = x + row * dim;
            auto *yr = y + row * dim;
            float sum_squares = 0.0f;
            for (std::int64_t d = 0; d < dim; ++d) {
                const float v = In::decode(xr[d]);
                sum_squares += v * v;
            }
            const float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(dim) + kEps);
            for (std::int64_t d = 0; d < dim; ++d) yr[d] = Out::encode(In::decode(xr[d]) * inv_rms * w[d]);
        }
    }
}

using NormFn = void (*)(const Workspace &, const void *, void *);

template <class In>
NormFn pick(DType out) {
    switch (out) {
    case DType::bf16: return scalar_norm<In, BF16>;
    case DType::f16: return scalar_norm<In, F16>;
    default: return scalar_norm<In, F32>;
    }
}

NormFn pick(DType in, DType out) {
    switch (in) {
    case DType::bf16: return pick<BF16>(out);
    case DType::f16: return pick<F16>(out);
    default: return pick<F32>(out);
    }
}

class ScalarRunner : public Runner {
public:
    explicit ScalarRunner(Workspace &ws) : ws_(ws), fn_(pick(ws.spec().in, ws.spec().out)) {}
    const void *run(std::size_t pair) override {
        fn_(ws_, ws_.x(pair), ws_.out(pair));
        return ws_.out(pair);
    }

private:
    Workspace &ws_;
    NormFn fn_;
};

}  // namespace

Implementation scalar_peer() {
    return {"scalar", 1, [](const Case &) { return true; },
            [](Workspace &ws) { return std::make_unique<ScalarRunner>(ws); }};
}

}  // namespace magi2norm::bench
