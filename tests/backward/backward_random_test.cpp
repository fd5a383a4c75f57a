// A randomized differential test of the backward against the float64 oracle: ranks 2-4, D from
// 1 to 12288 (odd ones too), M 1-4 with empty groups, P 1-4 with and without singleton-head
// broadcasting, every (x, dy, dx, dweight) dtype combination, strides (negative, zero,
// transposed, padded), dx over dy, accumulation, T = 0, NaN and Inf in x and dy, tiny and huge
// values. B1 (revised) and B2 on the FP32 call; B3 on the call in its own dtypes: the RNE cast of
// the FP32 call bit for bit, one local ULP of the oracle with no 1e-5 allowance, only the 2^-20 c
// of the terms that cancel (b3_one_ulp); bytes beside dx and the inputs untouched; calls the API does not
// take (a dy dtype other than x's or FP32, a dx whose tokens share memory, M > 1 without a
// grouping) are refused with their code and write nothing.
//
// MAGI2NORM_BACKWARD_RANDOM_CASES sets the count (default 300, the slice ctest runs; 10000 for
// the full run), MAGI2NORM_BACKWARD_RANDOM_FIRST the first case (to replay one);
// MAGI2NORM_BACKWARD_B3_NO_CANCELLATION_TERM=1 drops B3's 2^-20 term, which shows the elements
// where dx or dscale cancels below what FP32 resolves (they then fail).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>

#include "backward_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"
#include "strided_memory.hpp"

namespace backward_test {
namespace {

using magi2norm::ErrorCode;

std::int64_t env_or(const char *name, std::int64_t fallback) {
    const char *value = std::getenv(name);
    return value ? std::atoll(value) : fallback;
}

const DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};

DType pick(contract::Rng &rng) { return kDtypes[rng.integer(0, 2)]; }

// What the values of a case look like.
enum class Values { ordinary, special, tiny, huge, overflowing };

struct Case {
    magi2norm::NormConfig config;
    ref::Shape x_shape, dy_shape;
    DType x, dy, dx, dweight;
    GroupingKind grouping = GroupingKind::none;
    std::vector<std::int64_t> sizes;
    std::vector<std::int32_t> ids;
    Layout x_layout, dy_layout, dx_layout;
    bool in_place = false, accumulate = false;
    Values values = Values::ordinary;
    bool streaming = false;            // a policy that sends every dx to streaming stores
    std::optional<ErrorCode> refused;  // the code a call the API does not take gets

    std::string describe() const {
        std::ostringstream s;
        s << "x " << ref::format_shape(x_shape) << " " << magi2norm::dtype_name(x) << " (" << x_layout.describe() << "), dy "
          << magi2norm::dtype_name(dy) << " (" << dy_layout.describe() << "), dx " << magi2norm::dtype_name(dx) << " ("
          << (in_place ? "over dy" : dx_layout.describe()) << "), dweight " << magi2norm::dtype_name(dweight) << ", M "
          << config.num_modality << ", P " << config.num_patterns << ", grouping "
          << (grouping == GroupingKind::none ? "none" : grouping == GroupingKind::sizes ? "sizes" : "ids")
          << (accumulate ? ", accumulate" : "") << (streaming ? ", streaming policy" : "") << ", values "
          << static_cast<int>(values);
        return s.str();
    }
};

std::int64_t pick_dim(contract::Rng &rng) {
    switch (rng.integer(0, 9)) {
    case 0: case 1: case 2: case 3: return rng.integer(1, 64);
    case 4: case 5: return rng.integer(65, 512);
    case 6: return 16 * rng.integer(1, 256);  // whole streaming vectors
    case 7: return 2 * rng.integer(256, 2047) + 1;
    default: {
        const std::int64_t wide[] = {1023, 1536, 3071, 3072, 4097, 8191, 12287, 12288};
        return wide[rng.integer(0, 7)];
    }
    }
}

Layout pick_layout(contract::Rng &rng, std::size_t rank, bool output) {
    Layout l;
    switch (rng.integer(0, 7)) {
    case 0: l.transposed = true; break;
    case 1: l.inner_step = 2; break;
    case 2: l.row_padding = rng.integer(1, 9); break;
    case 3: l.reversed.assign(rank, false); l.reversed[0] = true; break;
    case 4: l.reversed.assign(rank, false); l.reversed[rng.integer(0, static_cast<std::int64_t>(rank) - 1)] = true; break;
    case 5: if (!output) l.broadcast_tokens = true; break;
    default: break;
    }
    return l;
}

Case make_case(std::uint64_t index) {
    contract::Rng rng(0x5eed0000 + index);
    Case c;
    const std::int64_t D = pick_dim(rng);
    c.config.dim = D;
    c.config.eps = rng.integer(0, 3) == 0 ? 1e-5f : 1e-6f;
    c.config.num_modality = rng.integer(1, 4);
    const std::size_t rank = static_cast<std::size_t>(rng.integer(2, 4));
    c.config.num_patterns = rank >= 3 && rng.integer(0, 1) ? rng.integer(2, 4) : 1;
    const std::int64_t P = c.config.num_patterns;
    // Rows a token: the middle axis (rank 4) times the heads; a few thousand elements a case on
    // average, tens of thousands at most.
    ref::Shape rows;
    if (rank == 4) rows.push_back(rng.integer(1, 3));
    if (rank >= 3) rows.push_back(P > 1 ? (rng.integer(0, 2) == 0 ? 1 : P) : rng.integer(1, 4));
    std::int64_t out_rows = 1;
    for (std::size_t i = 0; i < rows.size(); ++i) out_rows *= i + 1 == rows.size() && P > 1 ? P : rows[i];
    const std::int64_t budget = std::max<std::int64_t>(1, 250000 / (out_rows * D));
    const std::int64_t T = rng.integer(0, 24) == 0 ? 0 : rng.integer(1, std::min<std::int64_t>(budget, 400));
    c.x_shape = {T};
    c.x_shape.insert(c.x_shape.end(), rows.begin(), rows.end());
    c.x_shape.push_back(D);
    c.dy_shape = ref::output_shape(c.x_shape, P);

    c.x = pick(rng);
    c.dy = rng.integer(0, 1) ? c.x : DType::f32;
    c.dx = pick(rng);
    c.dweight = pick(rng);
    const std::int64_t M = c.config.num_modality;
    const auto g = rng.integer(M > 1 ? 1 : 0, 2);
    c.grouping = g == 0 ? GroupingKind::none : g == 1 ? GroupingKind::sizes : GroupingKind::ids;
    if (c.grouping == GroupingKind::sizes) {
        c.sizes.assign(static_cast<std::size_t>(M), 0);
        for (std::int64_t t = 0; t < T; ++t) ++c.sizes[static_cast<std::size_t>(rng.integer(0, M - 1))];
        if (M > 1 && rng.integer(0, 1)) {  // an empty group, its tokens moved to the next
            const auto e = static_cast<std::size_t>(rng.integer(0, M - 1));
            c.sizes[(e + 1) % c.sizes.size()] += c.sizes[e];
            c.sizes[e] = 0;
        }
    } else if (c.grouping == GroupingKind::ids) {
        c.ids = contract::random_ids(T, M, rng);
    }
    c.x_layout = pick_layout(rng, rank, false);
    c.dy_layout = pick_layout(rng, rank, false);
    c.dx_layout = pick_layout(rng, rank, true);
    c.in_place = c.dy_shape == c.x_shape && ref::element_size(c.dx) == ref::element_size(c.dy) && rng.integer(0, 3) == 0;
    c.accumulate = rng.integer(0, 2) == 0;
    c.streaming = rng.integer(0, 2) == 0;
    switch (rng.integer(0, 19)) {
    case 0: case 1: c.values = Values::special; break;
    case 2: c.values = Values::tiny; break;
    case 3: c.values = Values::huge; break;
    case 4: c.values = c.x == DType::f16 ? Values::huge : Values::overflowing; break;
    default: break;
    }
    // Calls the API does not take, one in 25.
    if (rng.integer(0, 24) == 0) {
        switch (rng.integer(0, 2)) {
        case 0:
            c.dy = c.x == DType::bf16 ? DType::f16 : DType::bf16;
            c.in_place = false;
            c.refused = ErrorCode::dtype;
            break;
        case 1:
            if (T > 1) {
                c.in_place = false;
                c.dx_layout = {};
                c.dx_layout.broadcast_tokens = true;
                c.refused = ErrorCode::stride;
            }
            break;
        default:
            if (M > 1) {
                c.grouping = GroupingKind::none;
                c.refused = ErrorCode::grouping;
            }
            break;
        }
    }
    if (c.in_place) c.dy_layout.broadcast_tokens = false;  // dx shares dy's layout
    return c;
}

// Values of one tensor: rows uniform in [-2^e, 2^e], e in [-3, 3] (as make_inputs), or the
// case's kind: a few NaN and Inf, rows near FP32's (FP16's) smallest, large rows whose mean
// square stays finite, or (x only) rows whose FP32 mean square overflows.
ref::HostTensor make_values(DType dtype, const ref::Shape &shape, Values kind, bool is_x, contract::Rng &rng) {
    ref::HostTensor t(dtype, shape);
    const std::int64_t row = shape.back();
    for (std::int64_t start = 0; start < t.size(); start += row) {
        int exponent = static_cast<int>(rng.integer(-3, 3));
        const bool odd_row = rng.integer(0, 3) == 0;
        if (odd_row && kind == Values::tiny) exponent = dtype == DType::f16 ? -20 : static_cast<int>(rng.integer(-140, -110));
        if (odd_row && kind == Values::huge) exponent = dtype == DType::f16 ? 15 : static_cast<int>(rng.integer(30, is_x ? 55 : 60));
        if (odd_row && kind == Values::overflowing && is_x) exponent = static_cast<int>(rng.integer(70, 127));
        for (std::int64_t d = 0; d < row; ++d) t.set(start + d, static_cast<float>(std::ldexp(rng.uniform(-1.0, 1.0), exponent)));
    }
    if (kind == Values::special && t.size() > 0) {
        for (std::int64_t k = rng.integer(1, 3); k > 0; --k) {
            const float special[] = {NAN, INFINITY, -INFINITY};
            t.set(rng.integer(0, t.size() - 1), special[rng.integer(0, 2)]);
        }
    }
    return t;
}

struct Buffers {
    StridedMemory x, dy, dx;
    ref::HostTensor dweight;
};

// B3's cancelling terms, or zeros when the environment drops them.
std::vector<double> b3_terms(const std::vector<double> &terms) {
    static const bool dropped = std::getenv("MAGI2NORM_BACKWARD_B3_NO_CANCELLATION_TERM") != nullptr;
    return dropped ? std::vector<double>(terms.size(), 0.0) : terms;
}

// What the cases ran, printed at the end.
struct Tally {
    int accepted = 0, refused = 0, in_place = 0, accumulated = 0, empty = 0, special = 0;
    std::int64_t beyond_one_ulp = 0, low_elements = 0;
    std::map<std::string, int> families;
};

// "cpu_single" of "magi2_norm_backward_cpu_single_bf16_f32_bf16".
std::string family_of(const std::string &variant) {
    const std::string prefix = "magi2_norm_backward_";
    std::string rest = variant.substr(std::min(variant.size(), prefix.size()));
    for (int i = 0; i < 3 && rest.rfind('_') != std::string::npos; ++i) rest = rest.substr(0, rest.rfind('_'));
    return rest;
}

bool same_bytes_outside(const ref::Bytes &after, const ref::Bytes &before, const std::vector<bool> &written) {
    for (std::size_t b = 0; b < after.size(); ++b) {
        if (!written[b] && after[b] != before[b]) return false;
    }
    return true;
}

// Runs case `index` and checks it; false when it failed (the failure already reported).
bool run_case(std::uint64_t index, Tally &tally) {
    const Case c = make_case(index);
    SCOPED_TRACE("case " + std::to_string(index) + ": " + c.describe());
    const int failures_before = testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    contract::Rng rng(0xda7a0000 + index);
    const ref::HostTensor weight = contract::random_weight(pick(rng), {c.config.num_modality * c.config.num_patterns * c.config.dim}, rng);
    const magi2norm::RMSNorm norm(c.config, weight.view());
    StridedMemory x(c.x, c.x_shape, c.x_layout), dy(c.dy, c.dy_shape, c.dy_layout);
    x.write(make_values(c.x, c.x_shape, c.values, true, rng));
    dy.write(make_values(c.dy, c.dy_shape, c.values, false, rng));
    const std::vector<std::int32_t> modality = c.grouping == GroupingKind::ids     ? c.ids
                                               : c.grouping == GroupingKind::sizes ? ref::modality_from_sizes(c.sizes)
                                                                                   : std::vector<std::int32_t>{};
    const magi2norm::Grouping grouping = c.grouping == GroupingKind::ids ? magi2norm::Grouping::ids(c.ids.data(), c.x_shape[0])
                                         : c.grouping == GroupingKind::sizes ? magi2norm::Grouping::sizes(c.sizes)
                                                                             : magi2norm::Grouping::none();
    const ref::Bytes x_before = x.bytes(), dy_before = dy.bytes();
    const StridedMemory dy_kept = dy;  // dy's values, for the oracle and the FP32 call after dx over dy
    ref::HostTensor old(c.dweight, weight.shape());
    for (std::int64_t i = 0; i < old.size(); ++i) old.set(i, static_cast<float>(rng.uniform(-2.0, 2.0)));

    // The call in the case's own dtypes, layouts and options.
    StridedMemory dx_memory(c.dx, c.x_shape, c.dx_layout);
    const magi2norm::TensorView dx_view = c.in_place ? dy.view_as(c.dx) : dx_memory.view();
    const ref::Bytes dx_before = dx_memory.bytes();
    ref::HostTensor dweight = old;
    magi2norm::BackwardOptions options;
    options.dx_dtype = c.dx;
    options.accumulate_dweight = c.accumulate;
    magi2norm::set_streaming_policy(c.streaming ? magi2norm::StreamingPolicy{1, 0, 0} : magi2norm::default_streaming_policy());
    try {
        norm.backward(x.view(), dy.view(), grouping, dx_view, dweight.view(), options);
        ++tally.families[c.x_shape[0] == 0 ? "none (T = 0)" : family_of(magi2norm::last_variant())];
        if (c.refused) ADD_FAILURE() << "not refused, expected " << magi2norm::error_code_name(*c.refused);
    } catch (const magi2norm::Error &e) {
        if (!c.refused) {
            ADD_FAILURE() << "refused: " << e.what();
        } else {
            EXPECT_EQ(e.code(), *c.refused) << e.what();
            EXPECT_TRUE(dx_memory.bytes() == dx_before) << "a refused call wrote dx";
            EXPECT_TRUE(dy.bytes() == dy_before) << "a refused call wrote dy";
            EXPECT_TRUE(ref::identical(dweight.view(), old.view())) << "a refused call wrote dweight";
            ++tally.refused;
        }
        return failures_before == testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    }
    ++tally.accepted;
    tally.in_place += c.in_place;
    tally.accumulated += c.accumulate;
    tally.empty += c.x_shape[0] == 0;
    tally.special += c.values != Values::ordinary;
    EXPECT_TRUE(x.bytes() == x_before) << "x changed";
    if (!c.in_place) {
        EXPECT_TRUE(dy.bytes() == dy_before) << "dy changed";
        EXPECT_TRUE(same_bytes_outside(dx_memory.bytes(), dx_before, dx_memory.element_bytes())) << "a byte beside dx changed";
    }

    // The oracle, on the values the views held before the call.
    const magi2norm::ConstTensorView dy_values = dy_kept.view();
    const Gradients o = oracle(make_problem(c.config, weight, x.view(), dy_values, modality));

    // The same call in FP32, out of place, into dx's layout: B1 and B2.
    StridedMemory dx32_memory(DType::f32, c.x_shape, c.in_place ? c.dy_layout : c.dx_layout);
    ref::HostTensor dscale32(DType::f32, weight.shape());
    magi2norm::BackwardOptions f32;
    f32.dx_dtype = DType::f32;
    norm.backward(x.view(), dy_values, grouping, dx32_memory.view(), dscale32.view(), f32);
    const ref::HostTensor dx32 = ref::HostTensor::copy_of(dx32_memory.view());
    EXPECT_TRUE(b1_close(dx32, o));
    EXPECT_TRUE(b2_close(dscale32, o.dscale, o.dscale_bound));

    // B3 on the case's call: its dx, and its dweight (the FP32 gradient cast, or added to the old
    // value in FP32 and cast once).
    const ref::HostTensor dx = ref::HostTensor::copy_of(dx_view);
    if (c.dx == DType::f32) {
        EXPECT_TRUE(ref::identical(dx.view(), dx32.view()));
    } else {
        EXPECT_TRUE(b3_one_ulp(dx, dx32, o.dx, b3_terms(o.dx_terms), &tally.beyond_one_ulp)) << "dx";
        tally.low_elements += dx.size();
    }
    if (c.accumulate) {
        ref::HostTensor expected(c.dweight, weight.shape());
        for (std::int64_t i = 0; i < expected.size(); ++i) expected.set(i, old.get(i) + dscale32.get(i));
        EXPECT_TRUE(ref::identical(dweight.view(), expected.view())) << "accumulated dweight";
    } else if (c.dweight == DType::f32) {
        EXPECT_TRUE(ref::identical(dweight.view(), dscale32.view()));
    } else {
        EXPECT_TRUE(b3_one_ulp(dweight, dscale32, o.dscale, b3_terms(o.dscale_bound), &tally.beyond_one_ulp)) << "dweight";
        tally.low_elements += dweight.size();
    }
    return failures_before == testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
}

TEST(RandomBackward, AgainstFloat64Oracle) {
    const std::int64_t first = env_or("MAGI2NORM_BACKWARD_RANDOM_FIRST", 0);
    const std::int64_t count = env_or("MAGI2NORM_BACKWARD_RANDOM_CASES", 300);
    const auto start = std::chrono::steady_clock::now();
    int failed = 0;
    Tally tally;
    for (std::int64_t i = first; i < first + count && failed < 10; ++i) {
        if (!run_case(static_cast<std::uint64_t>(i), tally)) ++failed;
    }
    magi2norm::set_streaming_policy(magi2norm::default_streaming_policy());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%lld random backward cases from %lld in %.1f s, %d failed (it stops at 10): %d accepted (%d in place, %d "
                "accumulated, %d with T = 0, %d with special, tiny or huge values), %d refused\n",
                static_cast<long long>(count), static_cast<long long>(first), seconds, failed, tally.accepted, tally.in_place,
                tally.accumulated, tally.empty, tally.special, tally.refused);
    for (const auto &[family, n] : tally.families) std::printf("  family %s: %d calls\n", family.c_str(), n);
    std::printf("  BF16/FP16 elements past one local ULP of the oracle, within 2^-20 of their cancelling terms: %lld of %lld\n",
                static_cast<long long>(tally.beyond_one_ulp), static_cast<long long>(tally.low_elements));
    EXPECT_GT(tally.accepted, 0);
}

}  // namespace
}  // namespace backward_test
