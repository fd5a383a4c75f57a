// The AVX-512 BF16 variants (cpu_avx512bf16*, cmake/ir_steps.py --native-bf16) encode BF16 with
// the CPU's conversion and recompute the lanes it rounds otherwise (FP32 subnormal results and
// NaN); they must write the bytes of the multi-target element form's integer encoder
// (generators/float_codecs.h) for every input dtype, in ordinary and streaming stores. Each case
// runs the planned call twice, through each variant (run_call with a chosen variant), on rows
// with ordinary values, results in the BF16 subnormal range, NaN and infinite inputs, and
// results past BF16's largest finite value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "magi2norm/float_codecs.hpp"
#include "magi2norm/internal.hpp"

namespace {

using magi2norm::ConstTensorView;
using magi2norm::DType;
using magi2norm::TensorView;
namespace detail = magi2norm::detail;

struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
};
using Aligned = std::unique_ptr<unsigned char, FreeDeleter>;
Aligned aligned_bytes(std::size_t n) { return Aligned(static_cast<unsigned char *>(std::aligned_alloc(64, (n + 63) / 64 * 64))); }

void put(DType t, unsigned char *base, std::int64_t i, float v) {
    if (t == DType::f32) {
        std::memcpy(base + 4 * i, &v, 4);
    } else {
        const std::uint16_t h = t == DType::bf16 ? magi2norm::f32_to_bf16(v) : magi2norm::f32_to_f16(v);
        std::memcpy(base + 2 * i, &h, 2);
    }
}

// Rows of D values: 0-1 ordinary; 2 a spike of 1e19 among values of ~1e-20 (results ~1e-38, BF16
// subnormals; FP16 inputs hold no such values and give zeros there); 3 a NaN (FP32 and FP16
// payloads, BF16 a quiet NaN) and an infinity; 4 ordinary values on a scale near FP32's largest
// (results past BF16's largest finite value round to inf).
constexpr std::int64_t kRows = 5;

class NativeBf16 : public testing::TestWithParam<DType> {
protected:
    void SetUp() override {
        if (!detail::cpu_runs(detail::Isa::avx512_bf16)) GTEST_SKIP() << "this CPU has no AVX-512 BF16 (or the build no such variants)";
    }
};

void expect_same_bytes(DType in, std::int64_t dim, bool streaming) {
    const std::string in_name = magi2norm::dtype_name(in);
    const std::string stores = streaming ? "streaming_" : "";
    const detail::KernelEntry *native = detail::kernel_named("magi2_norm_cpu_avx512bf16_" + stores + in_name + "_bf16");
    const detail::KernelEntry *integer = detail::kernel_named("magi2_norm_cpu_" + stores + in_name + "_bf16");
    if (native == nullptr || integer == nullptr) GTEST_SKIP() << "the build has no " << stores << "variants of both kinds";

    magi2norm::NormConfig config;
    config.dim = dim;
    config.out_dtype = DType::bf16;
    std::vector<float> weight(static_cast<std::size_t>(dim));
    std::uint64_t state = 7;
    const auto next = [&state] {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    };
    for (float &w : weight) w = next();
    const magi2norm::RMSNorm norm(config, ConstTensorView(weight.data(), DType::f32, {dim}));
    const magi2norm::RMSNorm huge(config, ConstTensorView(std::vector<float>(weight.size(), 3.3e38f).data(), DType::f32, {dim}));

    const std::size_t in_bytes = static_cast<std::size_t>(kRows * dim) * magi2norm::dtype_size(in);
    Aligned x = aligned_bytes(in_bytes);
    for (std::int64_t r = 0; r < kRows; ++r) {
        for (std::int64_t d = 0; d < dim; ++d) {
            float v = next() * 4.0f;
            if (r == 2) v = d == 3 ? 1e19f : v * 1e-20f;
            if (r == 3 && d == 5) v = std::nanf("");
            if (r == 3 && d == 9) v = INFINITY;
            put(in, x.get(), r * dim + d, v);
        }
    }
    if (in != DType::bf16) {  // a NaN payload with low bits set, which the native conversion would keep
        const std::uint32_t f32_nan = 0x7fc01234u;
        const std::uint16_t f16_nan = 0x7e01;
        if (in == DType::f32) std::memcpy(x.get() + 4 * (3 * dim + 11), &f32_nan, 4);
        if (in == DType::f16) std::memcpy(x.get() + 2 * (3 * dim + 11), &f16_nan, 2);
    }
    const std::size_t out_bytes = static_cast<std::size_t>(kRows * dim) * 2;
    Aligned by_native = aligned_bytes(out_bytes), by_integer = aligned_bytes(out_bytes);
    for (const magi2norm::RMSNorm *n : {&norm, &huge}) {
        std::memset(by_native.get(), 0x5a, out_bytes);
        std::memset(by_integer.get(), 0xa5, out_bytes);
        const magi2norm::Plan plan = n->plan(ConstTensorView(x.get(), in, {kRows, dim}), magi2norm::Grouping::none(),
                                             TensorView(by_native.get(), DType::bf16, {kRows, dim}));
        const detail::CallPlan &p = detail::call_plan_of(plan);
        detail::run_call(p, native, x.get(), by_native.get(), nullptr);
        ASSERT_STREQ(magi2norm::last_variant(), native->name);
        detail::run_call(p, integer, x.get(), by_integer.get(), nullptr);
        ASSERT_STREQ(magi2norm::last_variant(), integer->name);
        std::int64_t subnormals = 0, nans = 0, infs = 0;
        for (std::int64_t i = 0; i < kRows * dim; ++i) {
            std::uint16_t a = 0, b = 0;
            std::memcpy(&a, by_native.get() + 2 * i, 2);
            std::memcpy(&b, by_integer.get() + 2 * i, 2);
            ASSERT_EQ(a, b) << "element " << i << " (row " << i / dim << ")";
            const std::uint16_t e = a & 0x7f80, m = a & 0x7f;
            subnormals += e == 0 && m != 0;
            nans += e == 0x7f80 && m != 0;
            infs += e == 0x7f80 && m == 0;
        }
        if (n == &norm && in != DType::f16) EXPECT_GT(subnormals, 16) << "too few results in the BF16 subnormal range";
        EXPECT_GE(nans, 1) << "no NaN results";
        if (n == &huge) EXPECT_GT(infs, dim) << "no results past BF16's largest finite value";
    }
}

TEST_P(NativeBf16, SameBytesAsTheIntegerEncoder) {
    for (const std::int64_t dim : {64, 3072}) {
        SCOPED_TRACE("D = " + std::to_string(dim));
        expect_same_bytes(GetParam(), dim, false);
        expect_same_bytes(GetParam(), dim, true);
    }
}

TEST_P(NativeBf16, TheRuntimePicksThem) {
    detail::CallSize size{3072, 3072 * 4};
    const detail::KernelEntry *k = detail::find_kernel(magi2norm::Backend::cpu, GetParam(), DType::bf16, detail::Form::elements,
                                                       false, 0, size);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->isa, detail::Isa::avx512_bf16) << k->name;
}

INSTANTIATE_TEST_SUITE_P(Inputs, NativeBf16, testing::Values(DType::f32, DType::bf16, DType::f16),
                         [](const testing::TestParamInfo<DType> &info) { return std::string(magi2norm::dtype_name(info.param)); });

}  // namespace
