// The backward through the C ABI: a norm (dims, dtypes, weight count), x, dy, dx and dweight
// views into one arena (shapes, strides 0, negative or huge, byte offsets, dtypes, overlaps, dx
// over dy in place), a grouping (sizes, ids, out of range), dx's dtype and accumulation. A
// refused call must name its error and leave every byte of the arena as it was. An accepted one
// must have taken only what the API takes (dy of the output's shape in x's dtype or FP32, dx of
// x's shape in the resolved dtype, M*P*D dweight elements), change no byte outside dx's and
// dweight's elements, write dx and dweight as the RNE casts of the same call in FP32 (dweight
// added to its old value when accumulating), and, where the values keep FP32's intermediate
// results finite, meet B1 and B2 against the float64 oracle (tests/backward) and B3 exactly.
// Now and then x's and dy's elements are rewritten with ordinary values, NaN and Inf, so that the
// numerical checks run on most accepted calls. MAGI2NORM_FUZZ_TRACE=1 prints what each input
// decoded to (for keeping the seeds meaningful).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "backward_case.hpp"
#include "fuzz_views.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"

namespace {

using namespace fuzz;
using ref::Shape;

// Values whose FP32 intermediates stay finite where the float64 oracle's do (SPEC.md's overflow
// of the mean square included): x within 2^55, or from 2^70 to FP32's largest (its square
// overflows); dy within 2^20; NaN and Inf anywhere.
bool oracle_comparable(const magi2norm::ConstTensorView &view, double lo_gap, double hi_gap, double limit) {
    const ref::HostTensor values = ref::HostTensor::copy_of(view);
    for (std::int64_t i = 0; i < values.size(); ++i) {
        const double v = std::fabs(values.get(i));
        if (std::isnan(v) || std::isinf(v)) continue;
        if (v > limit || (v > lo_gap && v < hi_gap)) return false;
    }
    return true;
}

// With eps = 0, a row whose mean square is below FP32's normal range has an FP32 r of a few bits
// (or an infinite one), which no float64 evaluation reproduces.
bool tiny_row_without_eps(const magi2norm::NormConfig &config, const magi2norm::ConstTensorView &x) {
    if (config.eps > 0.0f) return false;
    const ref::HostTensor values = ref::HostTensor::copy_of(x);
    for (std::int64_t start = 0; start < values.size(); start += config.dim) {
        double ms = 0;
        for (std::int64_t d = 0; d < config.dim; ++d) ms += static_cast<double>(values.get(start + d)) * values.get(start + d);
        if (ms / static_cast<double>(config.dim) < 0x1p-100) return true;
    }
    return false;
}

magi2norm::NormConfig config_of(std::int64_t dim, float eps, std::int64_t m, std::int64_t p) {
    magi2norm::NormConfig c;
    c.dim = dim;
    c.eps = eps;
    c.num_modality = m;
    c.num_patterns = p;
    return c;
}

// The view's elements, row-major, as a flat tensor (dweight may have any shape, rank 0 too).
ref::HostTensor flat_copy(const magi2norm::ConstTensorView &view) {
    const ref::HostTensor copy = ref::HostTensor::copy_of(view);
    ref::HostTensor flat(copy.dtype(), {copy.size()});
    std::memcpy(flat.data(), copy.data(), copy.bytes().size());
    return flat;
}

struct Call {
    magi2norm::NormConfig config;
    ref::HostTensor weight;  // the values the norm was made from (zeros for a NULL weight)
    View x, dy, dx, dweight;
    magi2norm_dtype dx_dtype;
    bool accumulate;
    std::vector<std::int32_t> modality;
};

// An accepted call: what it took, what it wrote and how (see the top of the file).
bool tracing() {
    static const bool on = std::getenv("MAGI2NORM_FUZZ_TRACE") != nullptr;
    return on;
}

void check_accepted(const magi2norm_norm *norm, const Call &c, const magi2norm_grouping *grouping, const std::vector<unsigned char> &before,
                    const std::vector<unsigned char> &arena) {
    Shape out_shape;
    try {
        out_shape = ref::output_shape(c.x.shape, c.config.num_patterns);
    } catch (const std::invalid_argument &) {
        finding("a backward whose x does not broadcast with the scale succeeded");
    }
    const magi2norm_dtype resolved = known(c.dx_dtype) ? c.dx_dtype : c.x.dtype;
    if (c.dy.shape != out_shape) finding("a backward succeeded with dy of shape " + ref::format_shape(c.dy.shape));
    if (c.dy.dtype != c.x.dtype && c.dy.dtype != MAGI2NORM_F32) finding("a backward succeeded with dy in another dtype");
    if (c.dx.shape != c.x.shape) finding("a backward succeeded with dx of shape " + ref::format_shape(c.dx.shape));
    if (c.dx.dtype != resolved) finding("a backward succeeded with dx in another dtype than the resolved one");
    if (count(c.dweight) != c.config.num_modality * c.config.num_patterns * c.config.dim) finding("a backward succeeded with a dweight of another size");
    if (c.config.num_modality > 1 && grouping == nullptr) finding("a backward with M > 1 and no grouping succeeded");

    std::vector<bool> written(kArenaBytes, false);
    mark_elements(c.dx, written);
    mark_elements(c.dweight, written);
    for (std::int64_t b = 0; b < kArenaBytes; ++b) {
        if (!written[b] && arena[b] != before[b]) finding("a byte outside dx and dweight changed at " + std::to_string(b));
    }

    // The same call in FP32, out of place, on the arena as the call found it.
    std::vector<unsigned char> inputs = before;
    const magi2norm_tensor xt = tensor_of(c.x, inputs.data()), dyt = tensor_of(c.dy, inputs.data());
    ref::HostTensor dx32(magi2norm::DType::f32, c.x.shape), dscale32(magi2norm::DType::f32, {count(c.dweight)});
    const magi2norm_tensor dx32t{dx32.data(), MAGI2NORM_F32, static_cast<int>(c.x.shape.size()), c.x.shape.data(), nullptr,
                                 MAGI2NORM_MEMORY_HOST};
    const std::int64_t dweight_count = dscale32.size();
    const magi2norm_tensor dw32t{dscale32.data(), MAGI2NORM_F32, 1, &dweight_count, nullptr, MAGI2NORM_MEMORY_HOST};
    if (magi2norm_norm_backward(norm, &xt, &dyt, grouping, &dx32t, &dw32t, MAGI2NORM_F32, 0, nullptr) != MAGI2NORM_OK) {
        finding(std::string("the FP32 form of an accepted backward was refused: ") + magi2norm_last_error());
    }
    const ref::HostTensor dx = ref::HostTensor::copy_of(const_view(c.dx, arena.data()));
    const ref::HostTensor dweight = flat_copy(const_view(c.dweight, arena.data()));
    if (c.dx.dtype == MAGI2NORM_F32) {
        if (auto same = ref::identical(dx.view(), dx32.view()); !same) finding("FP32 dx differs from the FP32 call's: " + std::string(same.message()));
    } else if (auto cast = ref::gate2_cast_of_own_f32(dx.view(), dx32.view()); !cast) {
        finding("dx is not the RNE cast of the FP32 call's: " + std::string(cast.message()));
    }
    const ref::HostTensor old = flat_copy(const_view(c.dweight, before.data()));
    ref::HostTensor expected(dweight.dtype(), dweight.shape());
    for (std::int64_t i = 0; i < expected.size(); ++i) expected.set(i, (c.accumulate ? old.get(i) : 0.0f) + dscale32.get(i));
    if (auto same = ref::identical(dweight.view(), expected.view()); !same) {
        finding("dweight is not the FP32 call's gradient " + std::string(c.accumulate ? "added and " : "") + "cast: " + same.message());
    }

    // Against the float64 oracle, on values it evaluates as FP32 does.
    const magi2norm::ConstTensorView x_before = const_view(c.x, before.data()), dy_before = const_view(c.dy, before.data());
    if (!oracle_comparable(x_before, 0x1p55, 0x1p70, std::numeric_limits<float>::max()) || !oracle_comparable(dy_before, 0x1p20, 0x1p20, 0x1p20) ||
        tiny_row_without_eps(c.config, x_before)) {
        if (tracing()) std::printf("accepted, values out of the oracle's range\n");
        return;
    }
    if (tracing()) {
        std::printf("accepted: x %s, dx %s, M %lld, P %lld, accumulate %d, checked against the oracle\n", ref::format_shape(c.x.shape).c_str(),
                    magi2norm::dtype_name(dtype_of(c.dx.dtype)), static_cast<long long>(c.config.num_modality),
                    static_cast<long long>(c.config.num_patterns), c.accumulate);
        const ref::HostTensor xs = ref::HostTensor::copy_of(x_before), dys = ref::HostTensor::copy_of(dy_before);
        for (std::int64_t i = 0; i < xs.size(); ++i) std::printf("x[%lld] = %g\n", static_cast<long long>(i), xs.get(i));
        for (std::int64_t i = 0; i < dys.size(); ++i) std::printf("dy[%lld] = %g\n", static_cast<long long>(i), dys.get(i));
    }
    const backward_test::Gradients o = backward_test::oracle(backward_test::make_problem(c.config, c.weight, x_before, dy_before, c.modality));
    if (auto b1 = backward_test::b1_close(dx32, o); !b1) finding(b1.message());
    if (auto b2 = backward_test::b2_close(dscale32, o.dscale, o.dscale_bound); !b2) finding(b2.message());
    if (c.dx.dtype != MAGI2NORM_F32) {
        if (auto b3 = backward_test::b3_one_ulp(dx, dx32, o.dx, o.dx_terms); !b3) finding(std::string("dx ") + b3.message());
    }
    if (!c.accumulate && c.dweight.dtype != MAGI2NORM_F32) {
        if (auto b3 = backward_test::b3_one_ulp(dweight, dscale32, o.dscale, o.dscale_bound); !b3) finding(std::string("dweight ") + b3.message());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    Input in(data, size);
    const std::int64_t dim = in.in(0, 40) == 0 ? in.in(-2, 0) : in.in(1, 48);
    const float eps = in.flag() ? 1e-6f : static_cast<float>(in.in(0, 100)) * 0.01f;
    const std::int64_t m = in.in(0, 15) == 0 ? in.in(-1, 0) : in.in(1, 3);
    const std::int64_t p = in.in(0, 15) == 0 ? in.in(-1, 0) : in.in(1, 3);
    const magi2norm_dtype weight_dtype = pick_dtype(in);
    const std::int64_t weight_count = std::max<std::int64_t>(0, m * p * dim) + (in.in(0, 15) == 0 ? in.in(-1, 1) : 0);
    Call c;
    c.config = config_of(dim, eps, m, p);
    c.weight = ref::HostTensor(known(weight_dtype) ? dtype_of(weight_dtype) : magi2norm::DType::f32, {std::max<std::int64_t>(0, weight_count)});
    for (std::int64_t i = 0; i < c.weight.size(); ++i) c.weight.set(i, static_cast<float>(in.in(-64, 64)) / 32.0f);
    const bool null_weight = weight_count == 0 && in.flag();
    magi2norm_norm *norm = nullptr;
    if (magi2norm_norm_create(dim, eps, m, p, MAGI2NORM_DTYPE_UNSET, null_weight ? nullptr : c.weight.data(), weight_dtype, weight_count,
                              &norm) != MAGI2NORM_OK) {
        if (norm != nullptr) finding("a refused norm_create returned a norm");
        if (tracing()) std::printf("norm refused: %s\n", magi2norm_last_error());
        return 0;
    }
    // No weight values (count 0, NULL or not): all zeros, scale 1.
    if (c.weight.size() == 0) c.weight = ref::HostTensor(magi2norm::DType::f32, {m * p * dim});

    // Tokens on axis 0, up to two middle axes, the pattern axis (P or 1) when P > 1, then D.
    Shape x_shape{in.in(0, 6)};
    for (std::int64_t extra = in.in(0, 2); extra > 0; --extra) x_shape.push_back(in.in(1, 3));
    if (p > 1) x_shape.push_back(in.flag() ? p : 1);
    x_shape.push_back(dim);
    c.x = pick_view(in, x_shape);
    Shape dy_shape = c.x.shape;
    try {
        dy_shape = ref::output_shape(c.x.shape, p);
    } catch (const std::invalid_argument &) {
    }
    c.dy = pick_view(in, dy_shape);
    c.dx = pick_view(in, c.x.shape);
    if (in.in(0, 3) == 0) {  // dx over dy, in its own dtype or dy's
        const magi2norm_dtype own = c.dx.dtype;
        c.dx = c.dy;
        if (in.flag()) c.dx.dtype = own;
    }
    c.dweight = pick_view(in, {std::max<std::int64_t>(0, m * p * dim)});

    magi2norm_grouping grouping{};
    std::vector<std::int64_t> sizes;
    std::vector<std::int32_t> ids;
    const std::int64_t tokens = c.x.shape.empty() ? 0 : std::max<std::int64_t>(0, c.x.shape[0]);
    const auto kind = in.in(0, 4);
    grouping.kind = kind == 4 ? static_cast<magi2norm_grouping_kind>(9) : static_cast<magi2norm_grouping_kind>(kind % 3);
    if (grouping.kind == MAGI2NORM_GROUPING_SIZES) {
        sizes.resize(static_cast<std::size_t>(in.flag() ? m : in.in(0, 4)));
        for (auto &s : sizes) s = in.in(-1, 6);
        grouping.sizes = sizes.data();
        grouping.count = static_cast<std::int64_t>(sizes.size());
    } else if (grouping.kind == MAGI2NORM_GROUPING_IDS) {
        ids.resize(static_cast<std::size_t>(in.flag() ? tokens : in.in(0, 8)));
        for (auto &id : ids) id = static_cast<std::int32_t>(in.in(0, 15) == 0 ? in.in(-2, 5) : in.in(0, m - 1));
        grouping.ids = ids.empty() && in.flag() ? nullptr : ids.data();
        grouping.count = static_cast<std::int64_t>(ids.size());
    }
    const bool no_grouping = grouping.kind == MAGI2NORM_GROUPING_NONE && in.flag();
    c.dx_dtype = in.flag() ? MAGI2NORM_DTYPE_UNSET : pick_dtype(in);
    c.accumulate = in.flag();
    const bool ordinary_values = in.flag();
    const auto value_state = static_cast<std::uint32_t>(in.in(0, 65535));

    if (!callable(c.x) || !callable(c.dy) || !callable(c.dx) || !callable_any_stride(c.dweight)) {
        if (tracing()) std::printf("not called: a view outside the arena\n");
        magi2norm_norm_destroy(norm);
        return 0;
    }
    std::vector<unsigned char> arena = arena_of(value_state, ordinary_values, {&c.x, &c.dy});
    const std::vector<unsigned char> before = arena;
    const magi2norm_tensor xt = tensor_of(c.x, arena.data()), dyt = tensor_of(c.dy, arena.data());
    const magi2norm_tensor dxt = tensor_of(c.dx, arena.data()), dwt = tensor_of(c.dweight, arena.data());
    const magi2norm_grouping *g = no_grouping ? nullptr : &grouping;
    const magi2norm_status status = magi2norm_norm_backward(norm, &xt, &dyt, g, &dxt, &dwt, c.dx_dtype, c.accumulate ? 1 : 0, nullptr);
    if (status != MAGI2NORM_OK) {
        if (tracing()) std::printf("refused (%s): %s\n", magi2norm_status_name(status), magi2norm_last_error());
        check_refusal(status, arena, before);
    } else {
        if (grouping.kind == MAGI2NORM_GROUPING_IDS) c.modality = ids;
        if (grouping.kind == MAGI2NORM_GROUPING_SIZES) c.modality = ref::modality_from_sizes(sizes);
        check_accepted(norm, c, g, before, arena);
    }
    magi2norm_norm_destroy(norm);
    return 0;
}
