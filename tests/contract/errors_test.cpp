// Every bad argument is refused with magi2norm::Error, the right ErrorCode and a message naming
// the problem, before anything is written: the output, poisoned with 0xAB, stays byte for byte
// as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "throws_error.hpp"

namespace contract {
namespace {

using magi2norm::ErrorCode;
using magi2norm::Grouping;
using magi2norm::NormConfig;
using magi2norm::RMSNorm;

constexpr std::int64_t T = 5, D = 64;
constexpr unsigned char kPoison = 0xAB;

NormConfig config_of(std::int64_t num_modality = 1, std::int64_t num_patterns = 1) {
    NormConfig config;
    config.dim = D;
    config.num_modality = num_modality;
    config.num_patterns = num_patterns;
    return config;
}

class Errors : public testing::Test {
protected:
    // Expects forward to be refused with `code` and a message naming one of `words`, and the
    // memory of `out_memory` (which `out` points into) to stay poisoned.
    void expect_refused(const RMSNorm &norm, const magi2norm::ConstTensorView &x, const Grouping &grouping,
                        ref::HostTensor &out_memory, const magi2norm::TensorView &out, ErrorCode code,
                        const std::vector<std::string> &words, std::optional<DType> out_dtype = std::nullopt) {
        out_memory.fill_bytes(kPoison);
        EXPECT_TRUE(throws_error([&] { norm.forward(x, grouping, out, out_dtype); }, code, words));
        const ref::Bytes &bytes = out_memory.bytes();
        const auto written = std::find_if(bytes.begin(), bytes.end(), [](unsigned char b) { return b != kPoison; });
        EXPECT_TRUE(written == bytes.end()) << "a refused call wrote output byte " << (written - bytes.begin());
    }
    // The usual case: x [T, D] bf16 into a bf16 out [T, D].
    void expect_refused(const RMSNorm &norm, const magi2norm::ConstTensorView &x, const Grouping &grouping,
                        ErrorCode code, const std::vector<std::string> &words) {
        expect_refused(norm, x, grouping, out_, out_.view(), code, words);
    }

    Rng rng_{99};
    ref::HostTensor x_ = random_input(DType::bf16, {T, D}, rng_);
    ref::HostTensor out_{DType::bf16, {T, D}};
};

TEST_F(Errors, LastDimIsNotD) {
    const ref::HostTensor x = random_input(DType::bf16, {T, D - 1}, rng_);
    ref::HostTensor out(DType::bf16, {T, D - 1});
    expect_refused(RMSNorm(config_of()), x.view(), Grouping::none(), out, out.view(), ErrorCode::shape, {"dim"});
}

TEST_F(Errors, WeightSizeIsNotMPD) {
    const ref::HostTensor short_weight(DType::f32, {D - 1});
    EXPECT_TRUE(throws_error([&] { RMSNorm(config_of(), short_weight.view()); }, ErrorCode::weight, {"weight"}));
    // M = 2, P = 3 needs 6 * D values; one row of D is not enough, nor 6 rows of D + 1.
    const ref::HostTensor one_row(DType::bf16, {D});
    EXPECT_TRUE(throws_error([&] { RMSNorm(config_of(2, 3), one_row.view()); }, ErrorCode::weight, {"weight"}));
    const ref::HostTensor wide(DType::f16, {6, D + 1});
    RMSNorm norm(config_of(2, 3));
    EXPECT_TRUE(throws_error([&] { norm.set_weight(wide.view()); }, ErrorCode::weight, {"weight"}));
    EXPECT_EQ(norm.scale(), std::vector<float>(6 * D, 1.0f)) << "a refused set_weight changed the scale";
}

TEST_F(Errors, ViewsOfRankAboveEight) {
    // Views are checked without heap allocations, with room for 8 axes.
    ref::Shape eight(8, 1), nine(9, 1);
    eight.back() = D;
    nine.back() = D;
    const ref::HostTensor weight8(DType::f32, eight), weight9(DType::f32, nine);
    EXPECT_NO_THROW(RMSNorm(config_of(), weight8.view()));
    EXPECT_TRUE(throws_error([&] { RMSNorm(config_of(), weight9.view()); }, ErrorCode::shape, {"rank 9"}));
    expect_refused(RMSNorm(config_of()), {x_.data(), DType::bf16, nine}, Grouping::none(), out_,
                   {out_.data(), DType::bf16, nine}, ErrorCode::shape, {"rank 9"});
}

TEST_F(Errors, OutDtypeMismatch) {
    NormConfig config = config_of();
    config.out_dtype = DType::f32;
    const RMSNorm to_f32(config);
    // The config asks for f32, the output is bf16.
    expect_refused(to_f32, x_.view(), Grouping::none(), ErrorCode::dtype, {"dtype"});
    // A per-call f16 override, the output is bf16.
    expect_refused(RMSNorm(config_of()), x_.view(), Grouping::none(), out_, out_.view(), ErrorCode::dtype, {"dtype"},
                   DType::f16);
    // No override nor config: the output must be the input's bf16, not f32.
    ref::HostTensor out_f32(DType::f32, {T, D});
    expect_refused(RMSNorm(config_of()), x_.view(), Grouping::none(), out_f32, out_f32.view(), ErrorCode::dtype,
                   {"dtype"});
}

TEST_F(Errors, UnknownDtype) {
    magi2norm::ConstTensorView bad = x_.view();
    bad.dtype = static_cast<DType>(7);
    expect_refused(RMSNorm(config_of()), bad, Grouping::none(), ErrorCode::dtype, {"dtype"});
}

TEST_F(Errors, ShapesThatDoNotBroadcast) {
    const RMSNorm four_patterns(config_of(1, 4));
    // [T, 3, D] against a [4, D] scale.
    const ref::HostTensor x3 = random_input(DType::bf16, {T, 3, D}, rng_);
    ref::HostTensor out3(DType::bf16, {T, 4, D});
    expect_refused(four_patterns, x3.view(), Grouping::none(), out3, out3.view(), ErrorCode::shape, {"broadcast"});
    // [T, D] with T = 5, neither 1 nor P.
    ref::HostTensor out2(DType::bf16, {4, D});
    expect_refused(four_patterns, x_.view(), Grouping::none(), out2, out2.view(), ErrorCode::shape, {"broadcast"});
}

TEST_F(Errors, OutputOfTheWrongShape) {
    const RMSNorm norm(config_of());
    for (const ref::Shape &shape : {ref::Shape{T - 1, D}, ref::Shape{T, D + 1}, ref::Shape{T, 1, D}, ref::Shape{T * D}}) {
        SCOPED_TRACE(ref::format_shape(shape));
        ref::HostTensor out(DType::bf16, shape);
        expect_refused(norm, x_.view(), Grouping::none(), out, out.view(), ErrorCode::shape, {"output"});
    }
    // Singleton-head broadcasting makes [T, 1, D] into [T, P, D]; an output kept at [T, 1, D] is wrong.
    const ref::HostTensor x = random_input(DType::bf16, {T, 1, D}, rng_);
    ref::HostTensor out(DType::bf16, {T, 1, D});
    expect_refused(RMSNorm(config_of(1, 4)), x.view(), Grouping::none(), out, out.view(), ErrorCode::shape, {"output"});
}

TEST_F(Errors, BadGroupSizes) {
    const RMSNorm norm(config_of(3));
    expect_refused(norm, x_.view(), Grouping::sizes({-1, 3, 3}), ErrorCode::grouping, {"negative"});
    expect_refused(norm, x_.view(), Grouping::sizes({1, 1, 1}), ErrorCode::grouping, {"sum"});
    expect_refused(norm, x_.view(), Grouping::sizes({3, 3, 0}), ErrorCode::grouping, {"sum"});
    expect_refused(norm, x_.view(), Grouping::sizes({2, 3}), ErrorCode::grouping, {"group sizes"});
    expect_refused(norm, x_.view(), Grouping::sizes({2, 3, 0, 0}), ErrorCode::grouping, {"group sizes"});
    // A negative size is named even when the sizes before it already fill the tokens.
    expect_refused(norm, x_.view(), Grouping::sizes({5, 1, -1}), ErrorCode::grouping, {"group size 2 is negative"});
}

TEST_F(Errors, ModalityIdsOutOfRange) {
    const RMSNorm norm(config_of(3));
    const std::vector<std::int32_t> too_large = {0, 1, 3, 0, 2};
    expect_refused(norm, x_.view(), Grouping::ids(too_large.data(), T), ErrorCode::modality_id, {"modality id"});
    const std::vector<std::int32_t> negative = {0, 1, 2, -1, 2};
    expect_refused(norm, x_.view(), Grouping::ids(negative.data(), T), ErrorCode::modality_id, {"modality id"});
    // One id per token, no more, no less.
    const std::vector<std::int32_t> four = {0, 1, 2, 0};
    expect_refused(norm, x_.view(), Grouping::ids(four.data(), 4), ErrorCode::grouping, {"ids"});
}

TEST_F(Errors, MultipleModalitiesNeedGrouping) {
    expect_refused(RMSNorm(config_of(3)), x_.view(), Grouping::none(), ErrorCode::grouping, {"grouping"});
}

TEST_F(Errors, NoTokenAxisToGroup) {
    // Rank 1 has no token axis; nor has [P, D] under a [P, D] scale (axis 0 is the pattern axis).
    const ref::HostTensor x = random_input(DType::bf16, {D}, rng_);
    ref::HostTensor out(DType::bf16, {D});
    expect_refused(RMSNorm(config_of(3)), x.view(), Grouping::sizes({1, 0, 0}), out, out.view(), ErrorCode::grouping,
                   {"token axis"});
    const ref::HostTensor xp = random_input(DType::bf16, {4, D}, rng_);
    ref::HostTensor outp(DType::bf16, {4, D});
    expect_refused(RMSNorm(config_of(2, 4)), xp.view(), Grouping::sizes({2, 2}), outp, outp.view(),
                   ErrorCode::grouping, {"token axis"});
}

TEST_F(Errors, NullData) {
    const RMSNorm norm(config_of());
    expect_refused(norm, {nullptr, DType::bf16, {T, D}}, Grouping::none(), ErrorCode::null_data, {"null"});
    ref::HostTensor unused(DType::bf16, {1});
    expect_refused(norm, x_.view(), Grouping::none(), unused, {nullptr, DType::bf16, {T, D}}, ErrorCode::null_data,
                   {"null"});
    expect_refused(RMSNorm(config_of(3)), x_.view(), Grouping::ids(nullptr, T), ErrorCode::null_data, {"null"});
    EXPECT_TRUE(throws_error([] { RMSNorm(config_of(), {nullptr, DType::f32, {D}}); }, ErrorCode::null_data, {"null"}));
}

TEST_F(Errors, EmptyTensorsMayHaveNullData) {
    // Zero tokens: nothing to read or write, so null pointers are fine (and so is M > 1).
    const RMSNorm norm(config_of(3));
    EXPECT_NO_THROW(norm.forward({nullptr, DType::bf16, {0, D}}, Grouping::sizes({0, 0, 0}),
                                 {nullptr, DType::bf16, {0, D}}));
    // Empty whatever the other extents, in any axis order: no element and no overflow in the
    // count; the call refuses an extent past the kernels' int32 in either order alike.
    const RMSNorm one(config_of());
    const std::int64_t huge = std::int64_t{1} << 62;
    for (const ref::Shape &shape : {ref::Shape{huge, 0, D}, ref::Shape{0, huge, D}}) {
        EXPECT_EQ(magi2norm::element_count(shape), 0) << ref::format_shape(shape);
        EXPECT_TRUE(throws_error([&] { one.forward({nullptr, DType::bf16, shape}, Grouping::none(), {nullptr, DType::bf16, shape}); },
                                 ErrorCode::overflow, {"2^31"}))
            << ref::format_shape(shape);
    }
}

TEST_F(Errors, OutputShapeOfNegativeExtents) {
    const RMSNorm norm(config_of(1, 3));
    EXPECT_TRUE(throws_error([&] { norm.output_shape({-3, D}); }, ErrorCode::shape, {"negative"}));
    EXPECT_TRUE(throws_error([&] { norm.output_shape({-1, 1, D}); }, ErrorCode::shape, {"negative"}));
}

TEST_F(Errors, InputAndOutputOverlap) {
    const RMSNorm norm(config_of());
    // In place.
    ref::HostTensor x = x_;
    EXPECT_TRUE(throws_error([&] { norm.forward(x.view(), Grouping::none(), x.view()); }, ErrorCode::overlap,
                             {"overlap"}));
    EXPECT_TRUE(x.bytes() == x_.bytes()) << "a refused in-place call changed its memory";
    // The output starts in the middle of the input.
    ref::HostTensor memory(DType::bf16, {2 * T, D});
    const magi2norm::ConstTensorView x_first(memory.data(), DType::bf16, {T, D});
    expect_refused(norm, x_first, Grouping::none(), memory, {memory.data_at(T / 2 * D), DType::bf16, {T, D}},
                   ErrorCode::overlap, {"overlap"});
    // Per-token ids inside the output's memory: the kernel would overwrite ids it still reads.
    const RMSNorm two(config_of(2));
    const auto *ids_in_out = reinterpret_cast<const std::int32_t *>(out_.data_at(D));
    expect_refused(two, x_.view(), Grouping::ids(ids_in_out, T), ErrorCode::overlap, {"ids", "overlap"});
}

// Where the memory is gets checked before whether input and output overlap, which depends on
// what a pointer is (an address, or an OpenCL buffer's handle). Same-address views are refused
// for their memory, not as an overlap, and nothing is written.
TEST_F(Errors, MemoryIsCheckedBeforeOverlap) {
    const RMSNorm norm(config_of());
    ref::HostTensor memory = x_;
    const magi2norm::ConstTensorView on_device(memory.data(), DType::bf16, {T, D}, {}, magi2norm::Memory::device);
    const magi2norm::TensorView out_on_device(memory.data(), DType::bf16, {T, D}, {}, magi2norm::Memory::device);
    EXPECT_TRUE(throws_error(
        [&] { norm.forward(on_device, Grouping::none(), out_on_device, std::nullopt, {magi2norm::Backend::cpu}); },
        ErrorCode::device, {"cuda or opencl"}));
    const magi2norm::TensorView out_on_host(memory.data(), DType::bf16, {T, D});
    EXPECT_TRUE(throws_error([&] { norm.forward(on_device, Grouping::none(), out_on_host); }, ErrorCode::device,
                             {"host memory or all in device memory"}));
    EXPECT_TRUE(memory.bytes() == x_.bytes()) << "a refused call changed its memory";
}

TEST_F(Errors, SizesThatOverflow) {
    const RMSNorm norm(config_of());
    // 2^32 * 2^32 * D elements do not fit int64.
    const ref::Shape huge = {std::int64_t{1} << 32, std::int64_t{1} << 32, D};
    EXPECT_TRUE(throws_error([&] { magi2norm::element_count(huge); }, ErrorCode::overflow, {"int64", "overflow"}));
    expect_refused(norm, {x_.data(), DType::bf16, huge, {0, 0, 1}}, Grouping::none(), out_,
                   {out_.data(), DType::bf16, huge}, ErrorCode::overflow, {"int64", "overflow"});
    // 2^31 tokens (a broadcast input, so little memory): an extent beyond int32. The output
    // pointer's memory is small, so the call must refuse before writing anything. The input row
    // is static, below the heap, so that it cannot fall inside the output's claimed span.
    static const std::uint16_t one_row[D] = {};
    const ref::Shape tall = {std::int64_t{1} << 31, D};
    expect_refused(norm, {one_row, DType::bf16, tall, {0, 1}}, Grouping::none(), out_,
                   {out_.data(), DType::bf16, tall}, ErrorCode::overflow, {"2^31", "int32", "overflow"});
    // A stride whose offsets overflow int64.
    expect_refused(norm, {x_.data(), DType::bf16, {T, D}, {std::int64_t{1} << 62, 1}}, Grouping::none(),
                   ErrorCode::overflow, {"overflow", "range"});
}

TEST_F(Errors, StridesOfTheWrongLength) {
    const RMSNorm norm(config_of());
    expect_refused(norm, {x_.data(), DType::bf16, {T, D}, {1}}, Grouping::none(), ErrorCode::stride, {"stride"});
    expect_refused(norm, x_.view(), Grouping::none(), out_, {out_.data(), DType::bf16, {T, D}, {D, 1, 1}},
                   ErrorCode::stride, {"stride"});
}

TEST_F(Errors, OutputThatWritesAnElementTwice) {
    const RMSNorm norm(config_of());
    // Stride 0 over 5 tokens, and rows that overlap (stride D / 2).
    expect_refused(norm, x_.view(), Grouping::none(), out_, {out_.data(), DType::bf16, {T, D}, {0, 1}},
                   ErrorCode::stride, {"stride"});
    expect_refused(norm, x_.view(), Grouping::none(), out_, {out_.data(), DType::bf16, {T, D}, {D / 2, 1}},
                   ErrorCode::stride, {"stride"});
}

TEST_F(Errors, StrideZeroOnAnExtentOneOutputAxisIsFine) {
    ref::HostTensor out(DType::bf16, {1, D});
    EXPECT_NO_THROW(RMSNorm(config_of()).forward({x_.data(), DType::bf16, {1, D}}, Grouping::none(),
                                                 {out.data(), DType::bf16, {1, D}, {0, 1}}));
}

TEST_F(Errors, BadConfig) {
    const auto refused = [](NormConfig config, const std::vector<std::string> &words) {
        return throws_error([&] { RMSNorm{config}; }, ErrorCode::config, words);
    };
    NormConfig config = config_of();
    config.dim = 0;
    EXPECT_TRUE(refused(config, {"dim"}));
    config = config_of(0);
    EXPECT_TRUE(refused(config, {"modalit"}));
    config = config_of(1, 0);
    EXPECT_TRUE(refused(config, {"pattern"}));
    config = config_of();
    config.eps = -1e-6f;
    EXPECT_TRUE(refused(config, {"eps"}));
    config.eps = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(refused(config, {"eps"}));
    // The weight constructor checks the config as well.
    config.eps = 1e-6f;
    config.dim = -3;
    const ref::HostTensor weight(DType::f32, {3});
    EXPECT_TRUE(throws_error([&] { RMSNorm(config, weight.view()); }, ErrorCode::config, {"dim"}));
    // A scale no kernel can index (M * P * D past 2^31 - 1) is refused when the norm is made,
    // before 8 GiB of it would be allocated.
    config = config_of(2);
    config.dim = std::int64_t{1} << 30;
    EXPECT_TRUE(throws_error([&] { RMSNorm{config}; }, ErrorCode::overflow, {"2^31 - 1", "2147483648"}));
}

// A norm that has been moved from holds no scale: its calls are refused, not run on a missing
// scale (which wrote nothing and reported success), and a new weight makes it usable again.
TEST_F(Errors, MovedFromNormRefusesCalls) {
    RMSNorm norm(config_of());
    const RMSNorm moved_to(std::move(norm));
    expect_refused(norm, x_.view(), Grouping::none(), ErrorCode::config, {"moved from"});  // NOLINT: use after move on purpose
    const ref::HostTensor weight = random_weight(DType::bf16, {D}, rng_);
    norm.set_weight(weight.view());
    out_.fill_bytes(kPoison);
    EXPECT_NO_THROW(norm.forward(x_.view(), Grouping::none(), out_.view()));
    ref::HostTensor fresh_out(DType::bf16, {T, D});
    RMSNorm(config_of(), weight.view()).forward(x_.view(), Grouping::none(), fresh_out.view());
    EXPECT_TRUE(out_.bytes() == fresh_out.bytes()) << "the revived norm differs from a new one with the same weight";
}

// A copy of a moved-from norm is moved-from too (it had no scale to copy): refused, not silent.
TEST_F(Errors, CopiesOfAMovedFromNormRefuseCalls) {
    RMSNorm norm(config_of());
    const RMSNorm moved_to(std::move(norm));
    const RMSNorm copy(norm);  // NOLINT: use after move on purpose
    expect_refused(copy, x_.view(), Grouping::none(), ErrorCode::config, {"moved from"});
    RMSNorm assigned(config_of());
    assigned = norm;  // NOLINT: use after move on purpose
    expect_refused(assigned, x_.view(), Grouping::none(), ErrorCode::config, {"moved from"});
}

}  // namespace
}  // namespace contract
