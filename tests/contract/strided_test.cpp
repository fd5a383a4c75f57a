// Views that are not contiguous row-major: padded rows, a non-unit innermost stride, transposed
// memory, broadcast (stride-0) token and head axes, negative strides, a slice of a fused QKV
// tensor, and strided outputs. Each runs against the reference with all three gates; a strided
// output must also leave every byte between its elements untouched.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"
#include "throws_error.hpp"

namespace contract {
namespace {

struct DtypePair {
    DType in, out;
};

std::string name_of(const DtypePair &p) {
    return std::string(magi2norm::dtype_name(p.in)) + "_to_" + magi2norm::dtype_name(p.out);
}
std::string pair_name(const testing::TestParamInfo<DtypePair> &info) { return name_of(info.param); }
void PrintTo(const DtypePair &p, std::ostream *os) { *os << name_of(p); }

// 7: less than one block of the sum of squares' partials (64 elements at the CPU default); 100:
// a whole block and a partial one; 768: whole blocks.
const std::vector<std::int64_t> kDims = {7, 100, 768};
constexpr std::int64_t kTokens = 11;
constexpr unsigned char kPoison = 0xAB;

class Strided : public testing::TestWithParam<DtypePair> {
protected:
    // A case over `x` (memory owned by the caller): M = 3 with unsorted ids when x has a token
    // axis to group, else M = 1; weight in BF16 as in the model.
    NormCase make_case(const magi2norm::ConstTensorView &x, std::int64_t num_patterns, bool grouped) {
        NormCase c;
        c.x = x;
        c.config.dim = x.shape.back();
        c.config.num_patterns = num_patterns;
        c.config.out_dtype = GetParam().out;
        if (grouped) c.grouping = GroupingSpec::by_ids(random_ids(x.shape[0], 3, rng_), 3);
        c.config.num_modality = c.grouping.num_modality;
        c.weight = random_weight(DType::bf16, {c.config.num_modality * num_patterns * c.config.dim}, rng_);
        return c;
    }

    Rng rng_{2024};
};

TEST_P(Strided, RowStrideBeyondD) {
    for (std::int64_t D : kDims) {
        const ref::HostTensor memory = random_input(GetParam().in, {kTokens, D + 5}, rng_);
        expect_contract(make_case({memory.data(), GetParam().in, {kTokens, D}, {D + 5, 1}}, 1, true));
    }
}

TEST_P(Strided, InnermostStrideTwo) {
    for (std::int64_t D : kDims) {
        const ref::HostTensor memory = random_input(GetParam().in, {kTokens, 2 * D}, rng_);
        expect_contract(make_case({memory.data(), GetParam().in, {kTokens, D}, {2 * D, 2}}, 1, true));
    }
}

// The FP32 result of a strided view equals, bit for bit, the result on a contiguous copy of the
// same values: the vectorized path (unit strides) and the strided one add the same squares in
// the same order.
TEST_P(Strided, Fp32ResultDoesNotDependOnStrides) {
    for (std::int64_t D : kDims) {
        const ref::HostTensor memory = random_input(GetParam().in, {kTokens, 2 * D}, rng_);
        const NormCase strided = make_case({memory.data(), GetParam().in, {kTokens, D}, {2 * D, 2}}, 1, true);
        const ref::HostTensor copy = ref::HostTensor::copy_of(strided.x);
        NormCase contiguous = strided;
        contiguous.x = copy.view();
        EXPECT_EQ(run_library(strided, DType::f32).bytes(), run_library(contiguous, DType::f32).bytes()) << "D = " << D;
    }
}

TEST_P(Strided, TransposedView) {
    for (std::int64_t D : kDims) {
        // Memory [D, T] read as [T, D].
        const ref::HostTensor memory = random_input(GetParam().in, {D, kTokens}, rng_);
        expect_contract(make_case({memory.data(), GetParam().in, {kTokens, D}, {1, kTokens}}, 1, true));
    }
}

TEST_P(Strided, BroadcastTokenAxis) {
    for (std::int64_t D : kDims) {
        // One row seen as T tokens of different modalities: rows differ only by their scale.
        const ref::HostTensor memory = random_input(GetParam().in, {D}, rng_);
        expect_contract(make_case({memory.data(), GetParam().in, {kTokens, D}, {0, 1}}, 1, true));
    }
}

TEST_P(Strided, BroadcastHeadAxis) {
    for (std::int64_t D : kDims) {
        const ref::HostTensor memory = random_input(GetParam().in, {kTokens, D}, rng_);
        // P = 1: one row per token repeated over 4 heads; P = 4: the same row meets 4 pattern rows.
        expect_contract(make_case({memory.data(), GetParam().in, {kTokens, 4, D}, {D, 0, 1}}, 1, true));
        expect_contract(make_case({memory.data(), GetParam().in, {kTokens, 4, D}, {D, 0, 1}}, 4, true));
    }
}

TEST_P(Strided, NegativeTokenStride) {
    for (std::int64_t D : kDims) {
        // Tokens in reverse memory order: the view starts at the last row.
        const ref::HostTensor memory = random_input(GetParam().in, {kTokens, D}, rng_);
        expect_contract(make_case({memory.data_at((kTokens - 1) * D), GetParam().in, {kTokens, D}, {-D, 1}}, 1, true));
    }
}

TEST_P(Strided, KeyHeadsOfFusedQkv) {
    // The K norm reads the middle third of a fused [T, 3H, head_dim] projection in place.
    constexpr std::int64_t H = 4, head_dim = 128;
    const ref::HostTensor qkv = random_input(GetParam().in, {kTokens, 3 * H, head_dim}, rng_);
    expect_contract(make_case({qkv.data_at(H * head_dim), GetParam().in, {kTokens, H, head_dim},
                               {3 * H * head_dim, head_dim, 1}},
                              1, true));
}

// Runs `c` into `out` (a view into `memory`, poisoned beforehand) and checks the gates there, and
// that no byte of `memory` outside the view's elements changed.
void expect_into_strided(const NormCase &c, ref::HostTensor &memory, const magi2norm::TensorView &out) {
    SCOPED_TRACE(c.describe() + ", out strides " + ref::format_shape(out.strides));
    memory.fill_bytes(kPoison);
    const magi2norm::RMSNorm norm(c.config, c.weight.view());
    norm.forward(c.x, c.grouping.library(), out, c.out_override);

    const ref::HostTensor y32 = run_reference(c);
    if (out.dtype == DType::f32) {
        EXPECT_TRUE(ref::gate1_close(out, y32.view()));
    } else {
        EXPECT_TRUE(ref::gate2_cast_of_own_f32(out, run_library(c, DType::f32).view()));
        EXPECT_TRUE(ref::gate3_within_local_ulp(out, y32.cast(out.dtype).view()));
    }

    // The view's elements as offsets into `memory` (the view may start anywhere inside it).
    const ref::ViewReader reader(out);
    const auto *bytes = static_cast<const unsigned char *>(memory.data());
    const std::size_t size = ref::element_size(memory.dtype());
    const std::int64_t start = (static_cast<const unsigned char *>(out.data) - bytes) / static_cast<std::int64_t>(size);
    std::set<std::int64_t> covered;
    ref::for_each_index(out.shape, [&](const ref::Shape &index) { covered.insert(start + reader.offset(index)); });
    for (std::int64_t e = 0; e < memory.size(); ++e) {
        if (covered.count(e) != 0) continue;
        for (std::size_t b = 0; b < size; ++b) {
            ASSERT_EQ(bytes[e * size + b], kPoison) << "byte " << b << " of gap element " << e << " was written";
        }
    }
}

TEST_P(Strided, StridedOutputs) {
    const DType out_dtype = GetParam().out;
    for (std::int64_t D : kDims) {
        const ref::HostTensor x = random_input(GetParam().in, {kTokens, D}, rng_);
        const NormCase c = make_case(x.view(), 1, true);

        ref::HostTensor padded(out_dtype, {kTokens, D + 3});
        expect_into_strided(c, padded, {padded.data(), out_dtype, {kTokens, D}, {D + 3, 1}});
        ref::HostTensor every_other(out_dtype, {kTokens, 2 * D});
        expect_into_strided(c, every_other, {every_other.data(), out_dtype, {kTokens, D}, {2 * D, 2}});
        ref::HostTensor transposed(out_dtype, {D, kTokens});
        expect_into_strided(c, transposed, {transposed.data(), out_dtype, {kTokens, D}, {1, kTokens}});
        ref::HostTensor reversed(out_dtype, {kTokens, D});
        expect_into_strided(c, reversed, {reversed.data_at((kTokens - 1) * D), out_dtype, {kTokens, D}, {-D, 1}});
    }
}

// An axis of extent 1 never produces an offset, so its stride, however large or negative, is
// accepted on every view (input, output, weight) and changes nothing: each call equals the
// reference, and a BF16 -> BF16 row of whole blocks still takes the paired-word form.
TEST_P(Strided, ExtentOneAxesTakeAnyStride) {
    const DType in = GetParam().in, out_dtype = GetParam().out;
    constexpr std::int64_t kHuge = std::int64_t{1} << 31, kMax = std::numeric_limits<std::int64_t>::max();
    const ref::HostTensor x = random_input(in, {1, 4, 16}, rng_);
    ref::HostTensor out(out_dtype, {1, 4, 16});
    // The call of the report: a contiguous input, the output's extent-1 axis of stride 2^31.
    const NormCase report = make_case(x.view(), 1, false);
    const magi2norm::TensorView huge_out(out.data(), out_dtype, {1, 4, 16}, {kHuge, 16, 1});
    expect_into_strided(report, out, huge_out);
    magi2norm::RMSNorm(report.config, report.weight.view()).forward(x.view(), magi2norm::Grouping::none(), huge_out);
    const magi2norm::Backend backend = magi2norm::default_backend();
    EXPECT_TRUE(ran_variant(backend, in, out_dtype, false,
                            backend == magi2norm::Backend::cpu && in == DType::bf16 && out_dtype == DType::bf16));
    expect_into_strided(make_case({x.data(), in, {1, 4, 16}, {kMax, 16, 1}}, 1, false), out,
                        {out.data(), out_dtype, {1, 4, 16}, {-kMax, 16, 1}});
    // Extent-1 middle axes of a rank-4 view, grouped, and a row of one element (D = 1).
    const ref::HostTensor x4 = random_input(in, {3, 1, 4, 16}, rng_);
    ref::HostTensor out4(out_dtype, {3, 1, 4, 16});
    expect_into_strided(make_case({x4.data(), in, {3, 1, 4, 16}, {64, kHuge * 4, 16, 1}}, 1, true), out4,
                        {out4.data(), out_dtype, {3, 1, 4, 16}, {64, -kHuge * 8, 16, 1}});
    const ref::HostTensor column = random_input(in, {5, 1}, rng_);
    ref::HostTensor out_column(out_dtype, {5, 1});
    expect_into_strided(make_case({column.data(), in, {5, 1}, {1, kHuge}}, 1, true), out_column,
                        {out_column.data(), out_dtype, {5, 1}, {1, -7}});
    // The weight: a [1, 16] view whose axis 0 has stride 2^50 is the same weight as a dense one.
    const ref::HostTensor weight = random_weight(DType::bf16, {1, 16}, rng_);
    magi2norm::NormConfig config;
    config.dim = 16;
    const magi2norm::RMSNorm dense(config, weight.view());
    const magi2norm::RMSNorm strided(config, {weight.data(), DType::bf16, {1, 16}, {std::int64_t{1} << 50, 1}});
    EXPECT_EQ(strided.scale(), dense.scale());
    EXPECT_EQ(strided.scale(), ref::scale_of(weight.view()));
}

// A stride past the kernels' int32 on an axis that does step is refused, naming the view.
TEST(ExtentOne, AStrideOfAnAxisThatStepsIsRefusedNamingItsView) {
    magi2norm::NormConfig config;
    config.dim = 16;
    const magi2norm::RMSNorm norm(config);
    const ref::HostTensor x(DType::f32, {2, 4, 16});
    ref::HostTensor out(DType::f32, {2, 4, 16});
    out.fill_bytes(kPoison);
    const ref::HostTensor before = out;
    const std::vector<std::int64_t> huge = {std::int64_t{1} << 31, 16, 1};
    // The strides reach far past the memory, but the call is refused before any pointer is used.
    EXPECT_TRUE(throws_error([&] { norm.forward(x.view(), magi2norm::Grouping::none(), {out.data(), DType::f32, {2, 4, 16}, huge}); },
                             magi2norm::ErrorCode::overflow, {"output [2, 4, 16] has stride 2147483648 on axis 0"}));
    EXPECT_TRUE(throws_error([&] { norm.forward({x.data(), DType::f32, {2, 4, 16}, huge}, magi2norm::Grouping::none(), out.view()); },
                             magi2norm::ErrorCode::overflow, {"input [2, 4, 16] has stride 2147483648 on axis 0"}));
    EXPECT_EQ(out.bytes(), before.bytes());
}

// With one modality the runtime regroups rows into more tokens where both views' strides allow it
// (fold_rows, runtime/src/views/layout.cpp): the rows of [1, S, D], the batch and sequence of [B, S, D],
// a rank-4 middle axis; where they do not chain, the longer axis becomes the tokens. 48 rows of 768
// pass the 64 KiB of input a token keeps together.
TEST_P(Strided, OneModalityRowsRegroupedAsTokens) {
    constexpr std::int64_t B = 3, S = 48, D = 768;
    const DType in = GetParam().in;
    const ref::HostTensor memory = random_input(in, {B, S + 1, D}, rng_);
    const auto view = [&](std::int64_t first, ref::Shape shape, std::vector<std::int64_t> strides) {
        return magi2norm::ConstTensorView(memory.data_at(first), in, std::move(shape), std::move(strides));
    };
    expect_contract(make_case(view(0, {1, S, D}, {}), 1, false));
    expect_contract(make_case(view(0, {B, S, D}, {S * D, D, 1}), 1, false));
    expect_contract(make_case(view((S - 1) * D, {1, S, D}, {S * D, -D, 1}), 1, false));   // sequence reversed
    expect_contract(make_case(view(0, {B, S, D}, {(S + 1) * D, D, 1}), 1, false));       // padded batches
    expect_contract(make_case(view(0, {2, 3, 16, D}, {48 * D, 16 * D, D, 1}), 1, false));  // rank 4, dense
    expect_contract(make_case(view(0, {B, 2, 24, D}, {(S + 1) * D, 24 * D, D, 1}), 1, false));
    expect_contract(make_case(view(0, {2, 3, 4, D}, {12 * D, 4 * D, D, 1}), 4, false));   // P = 4: heads stay
    expect_contract(make_case(view(0, {2, S, D}, {S * D, D, 1}), S, false));  // P = 48: pattern rows past 64 KiB stay
    expect_contract(make_case(view(0, {2, S, D}, {D, 2 * D, 1}), 1, false));              // heads-major view
    // Ids and sizes of the one modality name tokens of axis 0, not the regrouped ones.
    NormCase by_ids = make_case(view(0, {B, S, D}, {S * D, D, 1}), 1, false);
    by_ids.grouping = GroupingSpec::by_ids(std::vector<std::int32_t>(B, 0), 1);
    expect_contract(by_ids);
    NormCase by_sizes = by_ids;
    by_sizes.grouping = GroupingSpec::by_sizes({B});
    expect_contract(by_sizes);

    // Short rows (up to 512 bytes) go to tokens of several rows: dense, padded and reversed.
    constexpr std::int64_t rows = 96, short_dim = 128;
    const ref::HostTensor short_rows = random_input(in, {rows, short_dim + 8}, rng_);
    const auto short_view = [&](std::int64_t first, std::vector<std::int64_t> strides) {
        return magi2norm::ConstTensorView(short_rows.data_at(first), in, {rows, short_dim}, std::move(strides));
    };
    expect_contract(make_case(short_view(0, {short_dim, 1}), 1, false));
    expect_contract(make_case(short_view(0, {short_dim + 8, 1}), 1, false));
    expect_contract(make_case(short_view((rows - 1) * (short_dim + 8), {-(short_dim + 8), 1}), 1, false));

    // An output whose batches are padded: the rows cannot merge although the input's would.
    const ref::HostTensor x = random_input(in, {B, S, D}, rng_);
    const NormCase c = make_case(x.view(), 1, false);
    ref::HostTensor padded(GetParam().out, {B, S + 1, D});
    expect_into_strided(c, padded, {padded.data(), GetParam().out, {B, S, D}, {(S + 1) * D, D, 1}});
}

// A one-modality call whose rows are regrouped into more tokens than axis 0 has must not hand the
// kernel the caller's ids (one per token of axis 0): they end where the process may not read, so
// reading an id of a regrouped token faults.
TEST(OneModalityIds, TheKernelReadsNoIdPastAxis0) {
    constexpr std::int64_t B = 3, S = 48, D = 768;
    const long page = sysconf(_SC_PAGESIZE);
    void *pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(pages, MAP_FAILED);
    ASSERT_EQ(mprotect(static_cast<char *>(pages) + page, page, PROT_NONE), 0);
    auto *ids = reinterpret_cast<std::int32_t *>(static_cast<char *>(pages) + page) - B;
    std::fill_n(ids, B, 0);

    Rng rng(77);
    const ref::HostTensor x = random_input(DType::bf16, {B, S, D}, rng);
    magi2norm::NormConfig config;
    config.dim = D;
    const magi2norm::RMSNorm norm(config, random_weight(DType::bf16, {D}, rng).view());
    ref::HostTensor by_ids(DType::bf16, {B, S, D}), plain(DType::bf16, {B, S, D});
    norm.forward(x.view(), magi2norm::Grouping::ids(ids, B), by_ids.view());
    norm.forward(x.view(), magi2norm::Grouping::none(), plain.view());
    EXPECT_EQ(by_ids.bytes(), plain.bytes());
    munmap(pages, 2 * page);
}

INSTANTIATE_TEST_SUITE_P(Pairs, Strided,
                         testing::Values(DtypePair{DType::f32, DType::f32}, DtypePair{DType::bf16, DType::bf16},
                                         DtypePair{DType::bf16, DType::f32}, DtypePair{DType::f16, DType::f16},
                                         DtypePair{DType::f32, DType::bf16}),
                         pair_name);

}  // namespace
}  // namespace contract
