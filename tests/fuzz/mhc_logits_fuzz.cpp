// The mHC logits through the C ABI: a norm (dims, patterns, weight count), x ([T, D] or
// [T, S, C]), phi, logits and an optional inverse RMS as views into one arena (shapes, strides 0,
// negative or huge, byte offsets, dtypes, overlaps), a grouping (sizes, ids, out of range). A
// refused call must name its error and leave every byte of the arena as it was. An accepted one
// must have taken only what the API takes (P = 1, x's rows of D, phi [D, N] and logits [T, N] and
// the inverse RMS [T] in FP32), change no byte outside the logits' and the inverse RMS's
// elements, and, on ordinary values (x within 2^40, phi within 2^20, rows whose mean square is
// not tiny without eps), give logits within SPEC.md's L1 of a float64 evaluation. Now and then x's
// and phi's elements are rewritten with ordinary values. MAGI2NORM_FUZZ_TRACE=1 prints each call's
// verdict (for keeping the seeds meaningful).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_views.hpp"
#include "reference/reference.hpp"

namespace {

using namespace fuzz;
using ref::Shape;

struct Call {
    magi2norm::NormConfig config;
    ref::HostTensor weight;
    View x, phi, logits, inverse_rms;
    bool with_inverse_rms = false;
    std::vector<std::int32_t> modality;
};

bool ordinary(const ref::HostTensor &t, double limit) {
    for (std::int64_t i = 0; i < t.size(); ++i) {
        const double v = t.get(i);
        if (!std::isfinite(v) || std::fabs(v) > limit) return false;
    }
    return true;
}

void check_accepted(const Call &c, const std::vector<unsigned char> &before, const std::vector<unsigned char> &arena) {
    const std::int64_t D = c.config.dim;
    std::int64_t row = 1;
    for (std::size_t i = 1; i < c.x.shape.size(); ++i) row *= c.x.shape[i];
    const std::int64_t tokens = c.x.shape.empty() ? -1 : c.x.shape[0], N = c.phi.shape.size() == 2 ? c.phi.shape[1] : -1;
    if (c.config.num_patterns != 1) finding("mhc_logits succeeded with num_patterns > 1");
    if ((c.x.shape.size() != 2 && c.x.shape.size() != 3) || row != D) finding("mhc_logits succeeded with x " + ref::format_shape(c.x.shape));
    if (c.phi.dtype != MAGI2NORM_F32 || c.phi.shape != Shape{D, N} || N < 1) finding("mhc_logits succeeded with phi " + ref::format_shape(c.phi.shape));
    if (c.logits.dtype != MAGI2NORM_F32 || c.logits.shape != Shape{tokens, N}) finding("mhc_logits succeeded with logits " + ref::format_shape(c.logits.shape));
    if (c.with_inverse_rms && (c.inverse_rms.dtype != MAGI2NORM_F32 || c.inverse_rms.shape != Shape{tokens})) {
        finding("mhc_logits succeeded with inverse RMS " + ref::format_shape(c.inverse_rms.shape));
    }
    std::vector<bool> written(kArenaBytes, false);
    mark_elements(c.logits, written);
    if (c.with_inverse_rms) mark_elements(c.inverse_rms, written);
    for (std::int64_t b = 0; b < kArenaBytes; ++b) {
        if (!written[b] && arena[b] != before[b]) finding("a byte outside the logits and the inverse RMS changed at " + std::to_string(b));
    }
    if (tokens == 0) return;
    // Against float64 (SPEC.md's L1), on ordinary values.
    const ref::HostTensor x = ref::HostTensor::copy_of(const_view(c.x, before.data()));
    const ref::HostTensor phi = ref::HostTensor::copy_of(const_view(c.phi, before.data()));
    const ref::HostTensor logits = ref::HostTensor::copy_of(const_view(c.logits, arena.data()));
    if (!ordinary(x, 0x1p40) || !ordinary(phi, 0x1p20)) return;
    const std::vector<float> scale = ref::scale_of(c.weight.view());
    for (std::int64_t t = 0; t < tokens; ++t) {
        double squares = 0;
        for (std::int64_t d = 0; d < D; ++d) squares += double(x.get(t * D + d)) * x.get(t * D + d);
        if (squares / double(D) < 0x1p-100 && c.config.eps == 0.0f) continue;  // an FP32 inverse RMS of a few bits
        const double inv = 1 / std::sqrt(squares / double(D) + double(c.config.eps));
        const std::int64_t m = c.modality.empty() ? 0 : c.modality[static_cast<std::size_t>(t)];
        for (std::int64_t j = 0; j < N; ++j) {
            double r = 0, a = 0, p = 0;
            for (std::int64_t d = 0; d < D; ++d) {
                const double y = double(x.get(t * D + d)) * inv * double(scale[static_cast<std::size_t>(m * D + d)]);
                r += y * phi.get(d * N + j);
                a += std::fabs(y * phi.get(d * N + j));
                p += std::fabs(phi.get(d * N + j));
            }
            // Plus one step of FP32's subnormals: the logits are FP32, and below its normal range
            // they hold values only to 2^-149.
            if (!(std::fabs(logits.get(t * N + j) - r) <= std::ldexp(a, -20) + std::ldexp(p, -40) + 0x1p-149)) {
                finding("logit [" + std::to_string(t) + ", " + std::to_string(j) + "] outside L1: " + std::to_string(logits.get(t * N + j)) +
                        " against " + std::to_string(r));
            }
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    Input in(data, size);
    const std::int64_t streams = in.in(1, 3), channels = in.in(0, 40) == 0 ? in.in(-1, 0) : in.in(1, 16);
    const std::int64_t dim = streams * channels;
    const float eps = in.flag() ? 1e-6f : static_cast<float>(in.in(0, 100)) * 0.01f;
    const std::int64_t m = in.in(0, 15) == 0 ? in.in(-1, 0) : in.in(1, 3);
    const std::int64_t p = in.in(0, 7) == 0 ? 2 : 1;
    const magi2norm_dtype weight_dtype = pick_dtype(in);
    const std::int64_t weight_count = std::max<std::int64_t>(0, m * p * dim);
    Call c;
    c.config.dim = dim;
    c.config.eps = eps;
    c.config.num_modality = m;
    c.config.num_patterns = p;
    c.weight = ref::HostTensor(known(weight_dtype) ? dtype_of(weight_dtype) : magi2norm::DType::f32, {weight_count});
    for (std::int64_t i = 0; i < c.weight.size(); ++i) c.weight.set(i, static_cast<float>(in.in(-64, 64)) / 32.0f);
    magi2norm_norm *norm = nullptr;
    if (magi2norm_norm_create(dim, eps, m, p, MAGI2NORM_DTYPE_UNSET, c.weight.data(), weight_dtype, weight_count, &norm) != MAGI2NORM_OK) {
        if (norm != nullptr) finding("a refused norm_create returned a norm");
        return 0;
    }
    const std::int64_t tokens = in.in(0, 5), columns = in.in(0, 20) == 0 ? 0 : in.in(1, 9);
    c.x = pick_view(in, in.flag() ? Shape{tokens, std::max<std::int64_t>(dim, 0)} : Shape{tokens, streams, std::max<std::int64_t>(channels, 0)});
    c.phi = pick_view(in, {std::max<std::int64_t>(dim, 0), columns});
    c.logits = pick_view(in, {tokens, columns});
    c.with_inverse_rms = in.flag();
    c.inverse_rms = pick_view(in, {tokens});

    magi2norm_grouping grouping{};
    std::vector<std::int64_t> sizes;
    std::vector<std::int32_t> ids;
    grouping.kind = static_cast<magi2norm_grouping_kind>(in.in(0, 2));
    if (grouping.kind == MAGI2NORM_GROUPING_SIZES) {
        sizes.resize(static_cast<std::size_t>(in.flag() ? m : in.in(0, 4)));
        for (auto &s : sizes) s = in.in(-1, 6);
        grouping.sizes = sizes.data();
        grouping.count = static_cast<std::int64_t>(sizes.size());
    } else if (grouping.kind == MAGI2NORM_GROUPING_IDS) {
        ids.resize(static_cast<std::size_t>(in.flag() ? tokens : in.in(0, 8)));
        for (auto &id : ids) id = static_cast<std::int32_t>(in.in(0, 15) == 0 ? in.in(-2, 5) : in.in(0, std::max<std::int64_t>(m - 1, 0)));
        grouping.ids = ids.data();
        grouping.count = static_cast<std::int64_t>(ids.size());
    }
    if (!callable(c.x) || !callable(c.phi) || !callable(c.logits) || (c.with_inverse_rms && !callable(c.inverse_rms))) {
        magi2norm_norm_destroy(norm);
        return 0;
    }
    const bool ordinary_values = in.flag();
    std::vector<unsigned char> arena = arena_of(static_cast<std::uint32_t>(in.in(0, 65535)), ordinary_values, {&c.x, &c.phi});
    const std::vector<unsigned char> before = arena;
    const magi2norm_tensor xt = tensor_of(c.x, arena.data()), phit = tensor_of(c.phi, arena.data());
    const magi2norm_tensor lt = tensor_of(c.logits, arena.data()), it = tensor_of(c.inverse_rms, arena.data());
    const magi2norm_status status = magi2norm_norm_mhc_logits(norm, &xt, &grouping, &phit, &lt, c.with_inverse_rms ? &it : nullptr);
    if (std::getenv("MAGI2NORM_FUZZ_TRACE") != nullptr) {
        std::printf("%s: %s\n", magi2norm_status_name(status), status == MAGI2NORM_OK ? ref::format_shape(c.x.shape).c_str() : magi2norm_last_error());
    }
    if (status != MAGI2NORM_OK) {
        check_refusal(status, arena, before);
    } else {
        if (grouping.kind == MAGI2NORM_GROUPING_IDS) c.modality = ids;
        if (grouping.kind == MAGI2NORM_GROUPING_SIZES) c.modality = ref::modality_from_sizes(sizes);
        check_accepted(c, before, arena);
    }
    magi2norm_norm_destroy(norm);
    return 0;
}
