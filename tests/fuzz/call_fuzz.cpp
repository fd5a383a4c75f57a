// View validation and the call itself through the C ABI: a norm (dims, dtypes, weight count),
// x and out views into one arena (shapes, strides 0, negative or huge, byte offsets, dtypes,
// overlaps), a grouping (sizes, ids, out of range), forward or a plan. Every call either is
// refused with a named status and leaves the arena as it was, or succeeds, and then out matches
// the reference of tests/reference and no byte outside out's elements changed.
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fuzz_views.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"

namespace {

using namespace fuzz;
using ref::Shape;

// out's elements match the reference of x's (read from `before`, the arena as the call found
// it), and every other byte of the arena is as it was.
void check_result(const ref::Params &params, const ref::HostTensor &weight, const View &x, const View &out,
                  magi2norm_dtype resolved, const std::vector<std::int32_t> &modality, const unsigned char *before,
                  const unsigned char *arena) {
    Shape expected_shape;
    try {
        expected_shape = ref::output_shape(x.shape, params.num_patterns);
    } catch (const std::invalid_argument &) {
        fuzz::finding("a call whose x does not broadcast with the scale succeeded");
    }
    if (out.shape != expected_shape) fuzz::finding("a call succeeded with out of shape " + ref::format_shape(out.shape));
    if (out.dtype != resolved) fuzz::finding("a call succeeded with out of another dtype than the resolved one");
    const magi2norm::ConstTensorView x_before(before + x.offset, dtype_of(x.dtype), x.shape, x.strides);
    // No weight values: all zeros, scale 1 (the C ABI's NULL weight of count 0).
    ref::HostTensor zeros(magi2norm::DType::f32, {params.num_modality * params.num_patterns * params.dim});
    zeros.fill_bytes(0);
    const ref::HostTensor &w = weight.size() == 0 ? zeros : weight;
    const ref::HostTensor y32 = ref::rms_norm(params, w.view(), x_before, modality);
    const magi2norm::ConstTensorView actual(arena + out.offset, dtype_of(out.dtype), out.shape, out.strides);
    const testing::AssertionResult gate = out.dtype == MAGI2NORM_F32
                                              ? ref::gate1_close(actual, y32.view())
                                              : ref::gate3_within_local_ulp(actual, y32.cast(dtype_of(out.dtype)).view());
    if (!gate) fuzz::finding(std::string("out differs from the reference: ") + gate.message());
    std::vector<bool> written(kArenaBytes, false);
    mark_elements(out, written);
    for (std::int64_t b = 0; b < kArenaBytes; ++b) {
        if (!written[b] && arena[b] != before[b]) fuzz::finding("a byte outside out changed at " + std::to_string(b));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    fuzz::Input in(data, size);
    ref::Params params;
    params.dim = in.in(0, 40) == 0 ? in.in(-2, 0) : in.in(1, 72);
    params.eps = in.flag() ? 1e-6f : static_cast<float>(in.in(0, 100)) * 0.01f;
    params.num_modality = in.in(0, 15) == 0 ? in.in(-1, 0) : in.in(1, 3);
    params.num_patterns = in.in(0, 15) == 0 ? in.in(-1, 0) : in.in(1, 2);
    const magi2norm_dtype weight_dtype = pick_dtype(in), config_out = in.flag() ? MAGI2NORM_DTYPE_UNSET : pick_dtype(in);
    const std::int64_t weight_count = std::max<std::int64_t>(0, params.num_modality * params.num_patterns * params.dim) +
                                      (in.in(0, 15) == 0 ? in.in(-1, 1) : 0);

    // The weight's values: small, from the input.
    ref::HostTensor weight(known(weight_dtype) ? dtype_of(weight_dtype) : magi2norm::DType::f32,
                           {std::max<std::int64_t>(0, weight_count)});
    for (std::int64_t i = 0; i < weight.size(); ++i) weight.set(i, static_cast<float>(in.in(-64, 64)) / 32.0f);
    magi2norm_norm *norm = nullptr;
    const bool null_weight = weight_count == 0 && in.flag();
    if (magi2norm_norm_create(params.dim, params.eps, params.num_modality, params.num_patterns, config_out,
                              null_weight ? nullptr : weight.data(), weight_dtype, weight_count, &norm) != MAGI2NORM_OK) {
        if (norm != nullptr) fuzz::finding("a refused norm_create returned a norm");
        return 0;
    }

    // Tokens on axis 0, then the pattern axis when P > 1, then D.
    Shape x_shape{in.in(0, 6)};
    for (std::int64_t extra = in.in(0, 2); extra > 0; --extra) x_shape.push_back(in.in(1, 3));
    if (params.num_patterns > 1) x_shape.push_back(in.flag() ? params.num_patterns : 1);
    x_shape.push_back(params.dim);
    const View x = pick_view(in, x_shape);
    Shape out_shape = x.shape;
    try {
        out_shape = ref::output_shape(x.shape, params.num_patterns);
    } catch (const std::invalid_argument &) {
    }
    View out = pick_view(in, out_shape);
    if (in.in(0, 7) == 0) out = x;  // in place

    magi2norm_grouping grouping{};
    std::vector<std::int64_t> sizes;
    std::vector<std::int32_t> ids;
    const std::int64_t tokens = x.shape.empty() ? 0 : std::max<std::int64_t>(0, x.shape[0]);
    const auto kind = in.in(0, 4);
    grouping.kind = kind == 4 ? static_cast<magi2norm_grouping_kind>(9) : static_cast<magi2norm_grouping_kind>(kind % 3);
    if (grouping.kind == MAGI2NORM_GROUPING_SIZES) {
        sizes.resize(static_cast<std::size_t>(in.flag() ? params.num_modality : in.in(0, 4)));
        for (auto &s : sizes) s = in.in(-1, 6);
        grouping.sizes = sizes.data();
        grouping.count = static_cast<std::int64_t>(sizes.size());
    } else if (grouping.kind == MAGI2NORM_GROUPING_IDS) {
        ids.resize(static_cast<std::size_t>(in.flag() ? tokens : in.in(0, 8)));
        for (auto &id : ids) id = static_cast<std::int32_t>(in.in(0, 15) == 0 ? in.in(-2, 5) : in.in(0, params.num_modality - 1));
        grouping.ids = ids.empty() && in.flag() ? nullptr : ids.data();
        grouping.count = static_cast<std::int64_t>(ids.size());
    }
    const magi2norm_dtype call_out = in.flag() ? MAGI2NORM_DTYPE_UNSET : pick_dtype(in);
    const bool through_plan = in.flag();
    const bool no_grouping = grouping.kind == MAGI2NORM_GROUPING_NONE && in.flag();

    if (!callable(x) || !callable(out)) {
        magi2norm_norm_destroy(norm);
        return 0;
    }
    // The arena's bytes from a seed: any bit patterns, NaN and Inf included, which the
    // reference and the gates handle.
    std::vector<unsigned char> arena = arena_of(static_cast<std::uint32_t>(in.in(0, 65535)));
    const std::vector<unsigned char> before = arena;
    const magi2norm_tensor xt = tensor_of(x, arena.data()), ot = tensor_of(out, arena.data());
    const magi2norm_grouping *g = no_grouping ? nullptr : &grouping;

    magi2norm_status status;
    if (through_plan) {
        magi2norm_plan *plan = nullptr;
        status = magi2norm_plan_create(norm, &xt, g, &ot, call_out, nullptr, &plan);
        if (status == MAGI2NORM_OK) {
            status = magi2norm_plan_run(plan, xt.data, ot.data, grouping.ids);
            magi2norm_plan_destroy(plan);
        }
    } else {
        status = magi2norm_norm_forward(norm, &xt, g, &ot, call_out, nullptr);
    }
    magi2norm_norm_destroy(norm);

    if (status != MAGI2NORM_OK) {
        check_refusal(status, arena, before);
        return 0;
    }
    const magi2norm_dtype resolved = known(call_out) ? call_out : known(config_out) ? config_out : x.dtype;
    std::vector<std::int32_t> modality;
    if (params.num_modality > 1 || grouping.kind != MAGI2NORM_GROUPING_NONE) {
        if (grouping.kind == MAGI2NORM_GROUPING_IDS) modality = ids;
        if (grouping.kind == MAGI2NORM_GROUPING_SIZES) modality = ref::modality_from_sizes(sizes);
    }
    View x_strided = x, out_strided = out;
    x_strided.given_strides = out_strided.given_strides = true;
    check_result(params, weight, x_strided, out_strided, resolved, modality, before.data(), arena.data());
    return 0;
}
