// SPEC.md's special values: zero rows, NaN and Inf, squares that overflow FP32, subnormal inputs
// and outputs, exact round-to-nearest-even ties and overflow in the final cast. Every case also
// runs the three gates (NaN == NaN) and checks that input and weight are unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"

namespace contract {
namespace {

const std::vector<DType> kDTypes = {DType::f32, DType::bf16, DType::f16};
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string pair_name(DType in, DType out) {
    return std::string(magi2norm::dtype_name(in)) + " -> " + magi2norm::dtype_name(out);
}

// x is [rows, D] (row-major, its own dtype); the weight f32 [D] unless given.
NormCase rows_case(const ref::HostTensor &x, DType out, ref::HostTensor weight, float eps = 1e-6f) {
    NormCase c;
    c.x = x.view();
    c.config.dim = x.shape().back();
    c.config.eps = eps;
    c.config.out_dtype = out;
    c.weight = std::move(weight);
    return c;
}

// Calls check(value, d) on every element of row `row` of the library's output for `c`.
template <typename Check>
void for_row(const NormCase &c, std::int64_t row, Check check) {
    const ref::HostTensor y = run_library(c);
    const std::int64_t D = c.config.dim;
    for (std::int64_t d = 0; d < D; ++d) check(y.get(row * D + d), d);
}

TEST(SpecialValues, ZeroRowsGiveZeros) {
    Rng rng(1);
    for (DType in : kDTypes) {
        for (DType out : kDTypes) {
            SCOPED_TRACE(pair_name(in, out));
            ref::HostTensor x = random_input(in, {4, 64}, rng);
            for (std::int64_t d = 0; d < 64; ++d) {
                x.set(64 + d, 0.0f);
                x.set(3 * 64 + d, -0.0f);
            }
            const NormCase c = rows_case(x, out, random_weight(DType::f32, {64}, rng));
            expect_contract(c);
            for (std::int64_t row : {1, 3}) {
                for_row(c, row, [&](float y, std::int64_t d) { ASSERT_EQ(y, 0.0f) << "row " << row << " d " << d; });
            }
        }
    }
}

// eps is the norm's, not a constant: with eps = 0 an all-zero row is 0 * (1 / sqrt(0)) = NaN, as
// the formula gives; with a large eps small rows shrink by the amount it says (checked against the
// reference by the gates).
TEST(SpecialValues, EpsIsTheNormsOwn) {
    Rng rng(11);
    for (DType in : kDTypes) {
        for (DType out : kDTypes) {
            SCOPED_TRACE(pair_name(in, out));
            ref::HostTensor x = random_input(in, {3, 48}, rng);
            for (std::int64_t d = 0; d < 48; ++d) {
                x.set(d, 0.0f);                                   // row 0: zeros
                x.set(48 + d, 0.01f * static_cast<float>(d % 7 + 1));  // row 1: mean square ~1e-3
            }
            const NormCase eps_zero = rows_case(x, out, random_weight(DType::f32, {48}, rng), 0.0f);
            expect_contract(eps_zero);
            for_row(eps_zero, 0, [](float y, std::int64_t d) { ASSERT_TRUE(std::isnan(y)) << "d " << d; });
            const NormCase eps_large = rows_case(x, out, ref::HostTensor(DType::f32, {48}), 0.1f);
            expect_contract(eps_large);
            // Scale 1: y = x / sqrt(ms + 0.1); the row's ms is below 3e-3, so |y| < |x| / sqrt(0.1) and
            // above |x| / sqrt(0.103), nowhere near x / rms (which has ms ~ 1).
            for_row(eps_large, 1, [&](float y, std::int64_t d) {
                const float xd = 0.01f * static_cast<float>(d % 7 + 1);
                ASSERT_LT(std::fabs(y), 1.01f * xd / std::sqrt(0.1f)) << "d " << d;
                ASSERT_GT(std::fabs(y), 0.99f * xd / std::sqrt(0.103f)) << "d " << d;
            });
        }
    }
}

TEST(SpecialValues, NanAnywhereMakesTheRowNan) {
    Rng rng(2);
    for (DType in : kDTypes) {
        for (DType out : kDTypes) {
            SCOPED_TRACE(pair_name(in, out));
            constexpr std::int64_t D = 37;
            ref::HostTensor x = random_input(in, {4, D}, rng);
            x.set(0 * D + 0, kNaN);       // first element
            x.set(1 * D + D / 2, -kNaN);  // middle, negative NaN
            x.set(2 * D + D - 1, kNaN);   // last element; row 3 stays finite
            const NormCase c = rows_case(x, out, random_weight(DType::bf16, {D}, rng));
            expect_contract(c);
            for (std::int64_t row : {0, 1, 2}) {
                for_row(c, row, [&](float y, std::int64_t d) { ASSERT_TRUE(std::isnan(y)) << "row " << row << " d " << d; });
            }
            for_row(c, 3, [](float y, std::int64_t d) { ASSERT_TRUE(std::isfinite(y)) << "d " << d; });
        }
    }
}

// NaNs whose mantissa is all ones: an encoder that rounds their bits like a number's carries
// into the exponent or the sign (0x7fffffff + 0x8000 is 0x80007fff: BF16 -0), and one that
// truncates a low payload (0x7f800001) makes an Inf. FP32 and FP16 inputs carry such payloads
// through the arithmetic (BF16 inputs have no low bits to carry).
TEST(SpecialValues, NanPayloadsStayNanInEveryOutput) {
    Rng rng(12);
    const std::uint32_t f32_nans[] = {0x7fffffffu, 0xffffffffu, 0x7f800001u, 0xff800001u, 0x7fff8000u};
    const std::uint16_t f16_nans[] = {0x7fff, 0xffff, 0x7c01, 0xfc01, 0x7e00};
    for (DType in : {DType::f32, DType::f16}) {
        for (DType out : kDTypes) {
            SCOPED_TRACE(pair_name(in, out));
            constexpr std::int64_t D = 40;
            constexpr std::int64_t rows = 5;
            ref::HostTensor x = random_input(in, {rows, D}, rng);
            for (std::int64_t row = 0; row < rows; ++row) {
                void *where = x.data_at(row * D + 7 * row);
                if (in == DType::f32) {
                    std::memcpy(where, &f32_nans[row], sizeof f32_nans[row]);
                } else {
                    std::memcpy(where, &f16_nans[row], sizeof f16_nans[row]);
                }
            }
            const NormCase c = rows_case(x, out, random_weight(DType::f32, {D}, rng));
            expect_contract(c);
            for (std::int64_t row = 0; row < rows; ++row) {
                for_row(c, row, [&](float y, std::int64_t d) { ASSERT_TRUE(std::isnan(y)) << "row " << row << " d " << d; });
            }
        }
    }
}

// NaN weights whose payloads have low bits set: with a BF16 input the CPU's BF16 encoder rounds
// NaNs without a NaN test, which relies on the runtime storing every NaN scale as a NaN with a
// clear low half (0x7fffffff rounded like a number is 0x8000, BF16 -0). FP32 weights keep their
// payloads through w + 1 (without the runtime's canonical NaN this test fails); FP16 ones
// (0x7fff would widen to 0x7fffe000) become 0x7e00 in the FP16 rounding of w + 1 today. D = 48
// takes the paired-word form for BF16 -> BF16 (checked through last_variant), D = 40 the
// element form.
TEST(SpecialValues, NanWeightPayloadsStayNanInEveryOutput) {
    Rng rng(13);
    const std::uint32_t f32_nans[] = {0x7fffffffu, 0xffffffffu, 0x7f800001u, 0x7fbfffffu};
    const std::uint16_t f16_nans[] = {0x7fff, 0xffff, 0x7c01, 0xfdff};
    const std::int64_t nan_at[] = {5, 16, 33, 39};
    for (const std::int64_t D : {48, 40}) {
        for (DType weight_dtype : {DType::f32, DType::f16}) {
            for (DType out : kDTypes) {
                SCOPED_TRACE(pair_name(DType::bf16, out) + ", D " + std::to_string(D) + ", weight " +
                             magi2norm::dtype_name(weight_dtype));
                constexpr std::int64_t rows = 3;
                ref::HostTensor weight = random_weight(weight_dtype, {D}, rng);
                for (int k = 0; k < 4; ++k) {
                    if (weight_dtype == DType::f32) {
                        std::memcpy(weight.data_at(nan_at[k]), &f32_nans[k], sizeof f32_nans[k]);
                    } else {
                        std::memcpy(weight.data_at(nan_at[k]), &f16_nans[k], sizeof f16_nans[k]);
                    }
                }
                const ref::HostTensor x = random_input(DType::bf16, {rows, D}, rng);
                const NormCase c = rows_case(x, out, std::move(weight));
                expect_contract(c);
                for (std::int64_t row = 0; row < rows; ++row) {
                    for_row(c, row, [&](float y, std::int64_t d) {
                        const bool nan_weight = std::count(std::begin(nan_at), std::end(nan_at), d) > 0;
                        ASSERT_EQ(std::isnan(y), nan_weight) << "row " << row << " d " << d << " gave " << y;
                    });
                }
                if (out == DType::bf16) {
                    const bool paired = D % 16 == 0 && magi2norm::default_backend() == magi2norm::Backend::cpu;
                    EXPECT_TRUE(ran_variant(magi2norm::default_backend(), DType::bf16, DType::bf16, false, paired));
                }
            }
        }
    }
}

TEST(SpecialValues, InfZeroesFiniteEntriesAndIsItselfNan) {
    Rng rng(3);
    for (DType in : kDTypes) {
        for (DType out : kDTypes) {
            SCOPED_TRACE(pair_name(in, out));
            constexpr std::int64_t D = 64;
            ref::HostTensor x = random_input(in, {3, D}, rng);
            x.set(0 * D + 3, kInf);
            x.set(1 * D + 0, -kInf);
            x.set(2 * D + 5, kInf);
            x.set(2 * D + 60, -kInf);
            const NormCase c = rows_case(x, out, random_weight(DType::f32, {D}, rng));
            expect_contract(c);
            for (std::int64_t row = 0; row < 3; ++row) {
                for_row(c, row, [&](float y, std::int64_t d) {
                    if (std::isinf(x.get(row * D + d))) {
                        ASSERT_TRUE(std::isnan(y)) << "Inf at row " << row << " d " << d << " gave " << y;
                    } else {
                        ASSERT_EQ(y, 0.0f) << "row " << row << " d " << d;
                    }
                });
            }
        }
    }
}

TEST(SpecialValues, SquareOverflowBehavesLikeInf) {
    // Only f32 and bf16 hold values whose square overflows FP32 (|x| > ~1.8e19).
    Rng rng(4);
    for (DType in : {DType::f32, DType::bf16}) {
        for (DType out : kDTypes) {
            SCOPED_TRACE(pair_name(in, out));
            constexpr std::int64_t D = 48;
            ref::HostTensor x = random_input(in, {3, D}, rng);
            x.set(0 * D + 7, 3e19f);                          // one square overflows
            for (std::int64_t d = 0; d < D; ++d) x.set(1 * D + d, -2e19f);  // every square does
            for (std::int64_t d = 0; d < D; ++d) x.set(2 * D + d, 1e19f);   // squares finite, their sum not
            const NormCase c = rows_case(x, out, random_weight(DType::f32, {D}, rng));
            expect_contract(c);
            for (std::int64_t row = 0; row < 3; ++row) {
                for_row(c, row, [&](float y, std::int64_t d) { ASSERT_EQ(y, 0.0f) << "row " << row << " d " << d; });
            }
        }
    }
}

// Subnormal inputs of each dtype: their squares vanish next to eps, so y = x * ~1000 * scale,
// which is not zero. A flush to zero would pass gate 1's absolute 1e-6, so it is checked apart.
TEST(SpecialValues, SubnormalInputsAreNotFlushed) {
    Rng rng(5);
    for (DType in : kDTypes) {
        for (DType out : kDTypes) {
            SCOPED_TRACE(pair_name(in, out));
            constexpr std::int64_t D = 64;
            ref::HostTensor x(in, {2, D});
            const float smallest_normal = in == DType::f16 ? 6.103515625e-05f : std::numeric_limits<float>::min();
            for (std::int64_t i = 0; i < x.size(); ++i) {
                x.set(i, static_cast<float>(rng.uniform(-1.0, 1.0)) * smallest_normal);
            }
            const NormCase c = rows_case(x, out, random_weight(DType::f32, {D}, rng));
            expect_contract(c);
            const ref::HostTensor y = run_library(c, DType::f32);
            for (std::int64_t i = 0; i < x.size(); ++i) {
                if (x.get(i) != 0.0f) {
                    ASSERT_NE(y.get(i), 0.0f) << "element " << i << " flushed to zero";
                }
            }
        }
    }
}

// Counts the BF16/FP16 subnormals (exponent field 0, mantissa not 0) among the output's elements.
std::int64_t subnormal_count(const ref::HostTensor &y) {
    const std::uint32_t exponent_mask = y.dtype() == DType::bf16 ? 0x7f80u : 0x7c00u;
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < y.size(); ++i) {
        const std::uint32_t bits = y.bits(i);
        if ((bits & exponent_mask) == 0 && (bits & 0x7fffu) != 0) ++count;
    }
    return count;
}

TEST(SpecialValues, OutputsInTheSubnormalRange) {
    Rng rng(6);
    constexpr std::int64_t D = 64;
    for (DType in : {DType::f32, DType::bf16}) {
        SCOPED_TRACE(magi2norm::dtype_name(in));
        // BF16 subnormals (< 2^-126): one spike of 1e19 makes inv ~ 8e-19, so entries of ~1e-20
        // normalize to ~1e-38.
        ref::HostTensor x(in, {3, D});
        for (std::int64_t i = 0; i < x.size(); ++i) x.set(i, static_cast<float>(rng.uniform(-1.0, 1.0)) * 1e-20f);
        for (std::int64_t row = 0; row < 3; ++row) x.set(row * D + row, 1e19f);
        const NormCase c = rows_case(x, DType::bf16, random_weight(DType::f32, {D}, rng));
        expect_contract(c);
        EXPECT_GT(subnormal_count(run_library(c)), 100) << "the case misses the BF16 subnormal range";
    }
    for (DType in : kDTypes) {
        SCOPED_TRACE(magi2norm::dtype_name(in));
        // FP16 subnormals (< 2^-14): a row of one 1 and entries ~1e-6 has inv ~ 8.
        ref::HostTensor x(in, {3, D});
        for (std::int64_t i = 0; i < x.size(); ++i) x.set(i, static_cast<float>(rng.uniform(-1.0, 1.0)) * 1e-6f);
        for (std::int64_t row = 0; row < 3; ++row) x.set(row * D + 2 * row, 1.0f);
        const NormCase by_input = rows_case(x, DType::f16, random_weight(DType::f32, {D}, rng));
        expect_contract(by_input);
        EXPECT_GT(subnormal_count(run_library(by_input)), 100) << "the case misses the FP16 subnormal range";

        // ... and through the scale: w = -1 + k*2^-24 makes the scale k*2^-24 exactly.
        ref::HostTensor unit = random_input(in, {3, D}, rng);
        ref::HostTensor weight(DType::f32, {D});
        for (std::int64_t d = 0; d < D; ++d) weight.set(d, -1.0f + std::ldexp(static_cast<float>(d + 1), -24));
        const NormCase by_scale = rows_case(unit, DType::f16, weight);
        expect_contract(by_scale);
        EXPECT_GT(subnormal_count(run_library(by_scale)), 50) << "the case misses the FP16 subnormal range";
    }
}

// One f32 row of D = 16 with exactly four entries of 1024 (n = 2), the others tiny or zero,
// normalizes exactly: ms = 4 * 2^20 / 16 = 2^18 (the tiny squares and eps vanish in FP32, in any
// summation order), inv = 2^-9, so n = x * 2^-9 with no rounding and y = n * scale is exact too.
// Entries are chosen to make y an exact tie (or just past one) of the output dtype.
struct TieEntry {
    float n;       // the exact normalized value: 2 for the 1024s, else the tiny x * 2^-9
    float scale;   // float32(w + 1), w = scale - 1 exactly in FP32
    std::uint16_t expected_bits;
};

void expect_ties(DType out, const std::vector<TieEntry> &entries) {
    constexpr std::int64_t D = 16;
    ref::HostTensor x(DType::f32, {1, D});
    ref::HostTensor weight(DType::f32, {D});
    for (std::int64_t d = 0; d < D; ++d) {
        const TieEntry e = d < static_cast<std::int64_t>(entries.size()) ? entries[d] : TieEntry{0.0f, 1.0f, 0};
        x.set(d, e.n * 512.0f);
        weight.set(d, e.scale - 1.0f);
    }
    const NormCase c = rows_case(x, out, weight);
    expect_contract(c);
    const ref::HostTensor y = run_library(c);
    for (std::size_t d = 0; d < entries.size(); ++d) {
        EXPECT_EQ(y.bits(static_cast<std::int64_t>(d)), entries[d].expected_bits)
            << "entry " << d << ": y32 = " << entries[d].n * entries[d].scale;
    }
}

TEST(SpecialValues, ExactTiesRoundToEven) {
    const float two = 2.0f;
    // BF16 keeps 8 significant bits: near 2 the spacing is 2^-6; its subnormals are k * 2^-133.
    expect_ties(DType::bf16, {
                                 {two, 1.0f + 0x1p-8f, 0x4000},                  // 2 + 2^-7: tie, down to even
                                 {two, 1.0f + 0x3p-8f, 0x4002},                  // 2 + 3*2^-7: tie, up to even
                                 {two, -(1.0f + 0x1p-8f), 0xc000},               // negative tie
                                 {two, 1.0f + 0x1p-8f + 0x1p-20f, 0x4001},       // just past a tie
                                 {0x1p-134f, 1.0f, 0x0000},                      // half the smallest subnormal
                                 {0x3p-134f, 1.0f, 0x0002},                      // 1.5 subnormal steps
                                 {0x5p-134f, 1.0f, 0x0002},                      // 2.5 subnormal steps
                                 {-0x3p-134f, 1.0f, 0x8002},
                                 {0xffp-134f, 1.0f, 0x0080},                     // tie into the smallest normal
                             });
    // FP16 keeps 11 significant bits: near 2 the spacing is 2^-9; its subnormals are k * 2^-24.
    expect_ties(DType::f16, {
                                {two, 1.0f + 0x1p-11f, 0x4000},
                                {two, 1.0f + 0x3p-11f, 0x4002},
                                {two, -(1.0f + 0x1p-11f), 0xc000},
                                {two, 1.0f + 0x1p-11f + 0x1p-20f, 0x4001},
                                {0x1p-25f, 1.0f, 0x0000},
                                {0x3p-25f, 1.0f, 0x0002},
                                {0x5p-25f, 1.0f, 0x0002},
                                {-0x3p-25f, 1.0f, 0x8002},
                                {0x7ffp-25f, 1.0f, 0x0400},                      // tie into the smallest normal
                            });
}

TEST(SpecialValues, CastOverflowGivesInf) {
    // Four entries with n = 2 exactly (as in the ties), so y = 2 * scale: past half a step above
    // the largest finite value the cast gives Inf; the tie itself rounds to even, Inf as well.
    expect_ties(DType::f16, {
                                {2.0f, 32759.5f, 0x7bff},   // 65519: below the tie, 65504
                                {2.0f, 32760.0f, 0x7c00},   // 65520: the tie, to Inf
                                {2.0f, -32760.0f, 0xfc00},
                                {2.0f, 1e6f, 0x7c00},
                            });
    // The largest BF16 is 0x1.fep127; the tie with the next step (Inf) is 0x1.ffp127.
    expect_ties(DType::bf16, {
                                 {2.0f, 0x1.fe8p126f, 0x7f7f},  // below the tie
                                 {2.0f, 0x1.ffp126f, 0x7f80},   // the tie, to Inf
                                 {2.0f, -0x1.ffp126f, 0xff80},
                                 {2.0f, 1.0f, 0x4000},
                             });
}

TEST(SpecialValues, InputAndWeightAreNotModified) {
    Rng rng(7);
    ref::HostTensor x = random_input(DType::bf16, {9, 3, 128}, rng);
    x.set(5, kNaN);
    const ref::HostTensor x_before = x;
    const ref::HostTensor weight = random_weight(DType::bf16, {2 * 128}, rng);
    NormCase c;
    c.x = x.view();
    c.config.dim = 128;
    c.config.num_modality = 2;
    c.config.out_dtype = DType::f32;
    c.grouping = GroupingSpec::by_sizes({4, 5});
    c.weight = weight;
    run_library(c);
    EXPECT_TRUE(x.bytes() == x_before.bytes());
    EXPECT_TRUE(c.weight.bytes() == weight.bytes());
}

}  // namespace
}  // namespace contract
