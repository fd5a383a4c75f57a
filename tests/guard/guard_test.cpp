// Every variant family the build has, run on views whose first byte, and in turn whose last
// byte, adjoins a PROT_NONE page: input, output, weight and per-token ids alike. A read or write
// one byte past any view faults; the handler names the case and the process dies, which fails
// the test. Shapes end exactly at a page, or leave a vector tail that a full vector would carry
// over the page; strided, reversed, broadcast and folded layouts take their own paths. Every
// result is checked against the reference, and the cases each family ran are counted.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fault_report.hpp"
#include "guarded_view.hpp"
#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"

namespace guard {
namespace {

using contract::Rng;
using magi2norm::Backend;
using magi2norm::DType;

struct Case {
    std::string what;
    std::string family;  // the family the call must run: cpu, cpu_paired, cpu_streaming, ...
    DType in, out;
    ref::Shape shape;                         // the input's
    std::vector<std::int64_t> x_strides = {};  // empty: dense
    std::vector<std::int64_t> out_strides = {};
    std::int64_t num_modality = 1, num_patterns = 1;
    bool by_ids = false;
};

class Guard : public testing::Test {
protected:
    FaultReport fault_report_;

    // Runs `c` with every view against a guard page on `side`, on `backend`, and checks the result.
    void run(const Case &c, Side side, Backend backend) {
        const std::string name = c.what + (side == Side::first ? ", first bytes" : ", last bytes") + " on " +
                                 magi2norm::backend_name(backend);
        set_running_case(name);
        SCOPED_TRACE(name);
        const std::int64_t D = c.shape.back(), M = c.num_modality, T = c.shape[0];
        magi2norm::NormConfig config;
        config.dim = D;
        config.num_modality = M;
        config.num_patterns = c.num_patterns;
        config.out_dtype = c.out;
        const ref::HostTensor weight = contract::random_weight(DType::bf16, {M * c.num_patterns * D}, rng_);
        const GuardedView w(weight, {}, side);
        const magi2norm::RMSNorm norm(config, w.view);

        const GuardedView x(contract::random_input(c.in, c.shape, rng_), c.x_strides, side);
        const ref::HostTensor out_shape(c.out, ref::output_shape(c.shape, c.num_patterns));
        GuardedView out(out_shape, c.out_strides, side);

        std::vector<std::int32_t> modality;
        std::unique_ptr<GuardedMemory> ids;
        magi2norm::Grouping grouping = magi2norm::Grouping::none();
        if (c.by_ids) {
            modality = contract::random_ids(T, M, rng_);
            ids = std::make_unique<GuardedMemory>(0, T * 4, side);
            std::memcpy(ids->element0(), modality.data(), static_cast<std::size_t>(T) * 4);
            grouping = magi2norm::Grouping::ids(reinterpret_cast<const std::int32_t *>(ids->element0()), T);
        } else if (M > 1) {
            std::vector<std::int64_t> sizes(static_cast<std::size_t>(M), T / M);
            sizes.back() += T % M;
            modality = ref::modality_from_sizes(sizes);
            grouping = magi2norm::Grouping::sizes(sizes);
        }

        magi2norm::CallOptions options;
        options.stream.backend = backend;
        const bool streaming = c.family.find("streaming") != std::string::npos;
        options.streaming = magi2norm::StreamingPolicy{streaming ? 1 : 0, 0, 0};
        norm.forward(x.view, grouping, out.view, options);
        const std::string family = backend == Backend::cpu ? contract::cpu_family_run(c.out, c.family) : "opencl (host copies)";
        EXPECT_TRUE(contract::ran_variant(backend, c.in, c.out, streaming, family.find("paired") != std::string::npos));
        ++cases_[family];

        const ref::HostTensor y32 = ref::rms_norm(contract::params_of(config), weight.view(), x.view, modality);
        if (c.out == DType::f32) {
            EXPECT_TRUE(ref::gate1_close(out.view, y32.view()));
        } else {
            EXPECT_TRUE(ref::gate3_within_local_ulp(out.view, y32.cast(c.out).view()));
        }
    }

    void run_both_sides(const std::vector<Case> &cases, Backend backend) {
        for (const Case &c : cases) {
            for (const Side side : {Side::first, Side::last}) run(c, side, backend);
        }
    }

    Rng rng_{41};
    std::map<std::string, int> cases_;
};

// Rows of the element form: tails shorter than any vector (D = 1, 7), odd tails (33, 100, 777),
// whole vectors (768), two pages exactly (2 x 1024 f32), modalities by ids and by sizes, patterns.
const std::vector<Case> kElementCases = {
    {"f32 [3, 7]", "cpu", DType::f32, DType::f32, {3, 7}},
    {"f32 [5, 1], D = 1", "cpu", DType::f32, DType::f32, {5, 1}},
    {"f32 [5, 100] M = 3 by ids", "cpu", DType::f32, DType::f32, {5, 100}, {}, {}, 3, 1, true},
    {"f32 [2, 1024]: two pages", "cpu", DType::f32, DType::f32, {2, 1024}},
    {"bf16 -> f32 [4, 33]", "cpu", DType::bf16, DType::f32, {4, 33}},
    {"f16 [3, 777] M = 2 by sizes", "cpu", DType::f16, DType::f16, {3, 777}, {}, {}, 2},
    {"f32 -> bf16 [2, 768]", "cpu", DType::f32, DType::bf16, {2, 768}},
    {"bf16 [5, 100]: rows of no whole block", "cpu", DType::bf16, DType::bf16, {5, 100}, {}, {}, 3, 1, true},
    {"bf16 -> f32 [3, 4, 24] P = 4", "cpu", DType::bf16, DType::f32, {3, 4, 24}, {}, {}, 2, 4, true},
};

// Strided paths: inner stride 2 on either side, reversed tokens, transposed, broadcast tokens
// and heads.
const std::vector<Case> kStridedCases = {
    {"f32 [3, 100], input inner stride 2", "cpu", DType::f32, DType::f32, {3, 100}, {200, 2}},
    {"bf16 [3, 33], output inner stride 2", "cpu", DType::bf16, DType::bf16, {3, 33}, {}, {66, 2}},
    {"bf16 -> f32 [4, 64], tokens reversed on both", "cpu", DType::bf16, DType::f32, {4, 64}, {-64, 1}, {-64, 1}, 2, 1, true},
    {"f16 [5, 40], input transposed", "cpu", DType::f16, DType::f16, {5, 40}, {1, 5}},
    {"f32 [6, 24], input tokens broadcast", "cpu", DType::f32, DType::f32, {6, 24}, {0, 1}},
    {"bf16 [3, 1, 32] under P = 4", "cpu_paired", DType::bf16, DType::bf16, {3, 1, 32}, {}, {}, 1, 4},
};

// The paired-word form: BF16 rows of whole 16-element blocks, one page exactly (2 x 1024), a
// strided pair of even strides.
const std::vector<Case> kPairedCases = {
    {"bf16 [4, 768]", "cpu_paired", DType::bf16, DType::bf16, {4, 768}},
    {"bf16 [2, 1024]: one page", "cpu_paired", DType::bf16, DType::bf16, {2, 1024}},
    {"bf16 [3, 48] M = 2 by ids", "cpu_paired", DType::bf16, DType::bf16, {3, 48}, {}, {}, 2, 1, true},
    {"bf16 [3, 32], rows 96 apart", "cpu_paired", DType::bf16, DType::bf16, {3, 32}, {96, 1}, {96, 1}},
};

// Streaming stores: rows of whole 16-byte lines with vector tails (24 f32), two pages exactly,
// the paired form's.
const std::vector<Case> kStreamingCases = {
    {"f32 [3, 24] streaming", "cpu_streaming", DType::f32, DType::f32, {3, 24}},
    {"f32 [2, 1024] streaming: two pages", "cpu_streaming", DType::f32, DType::f32, {2, 1024}},
    {"bf16 -> f32 [5, 40] streaming", "cpu_streaming", DType::bf16, DType::f32, {5, 40}, {}, {}, 3, 1, true},
    {"bf16 [3, 784] paired streaming", "cpu_paired_streaming", DType::bf16, DType::bf16, {3, 784}},
    {"bf16 [2, 2048] paired streaming: two pages", "cpu_paired_streaming", DType::bf16, DType::bf16, {2, 2048}},
};

// One modality's short rows, regrouped into tokens of several rows (fold_rows), dense and padded.
const std::vector<Case> kFoldedCases = {
    {"bf16 [96, 128] folded", "cpu_paired", DType::bf16, DType::bf16, {96, 128}},
    {"f32 [64, 24] folded", "cpu", DType::f32, DType::f32, {64, 24}},
    {"f16 [60, 7] folded, padded rows", "cpu", DType::f16, DType::f16, {60, 7}, {9, 1}},
    {"f32 [3, 16, 24] folded", "cpu", DType::f32, DType::f32, {3, 16, 24}},
};

// Every row length to 65 and some past it, [3, D], in three dtype pairs: each vector width's
// tails, and the paired form where BF16 rows are whole blocks; streaming stores for every row of
// whole 32-byte lines to 96 f32 and 112 bf16.
std::vector<Case> tail_sweep() {
    std::vector<Case> cases;
    std::vector<std::int64_t> dims;
    for (std::int64_t d = 1; d <= 65; ++d) dims.push_back(d);
    for (std::int64_t d : {127, 128, 129, 255, 257, 1000}) dims.push_back(d);
    for (std::int64_t d : dims) {
        const std::string tail = " [3, " + std::to_string(d) + "]";
        cases.push_back({"f32" + tail, "cpu", DType::f32, DType::f32, {3, d}});
        cases.push_back({"bf16" + tail, d % 16 == 0 ? "cpu_paired" : "cpu", DType::bf16, DType::bf16, {3, d}});
        cases.push_back({"f16 -> f32" + tail, "cpu", DType::f16, DType::f32, {3, d}});
    }
    if (MAGI2NORM_STREAMING_ALIGNMENT > 0) {
        for (std::int64_t d = 8; d <= 96; d += 8) cases.push_back({"f32 streaming [3, " + std::to_string(d) + "]", "cpu_streaming", DType::f32, DType::f32, {3, d}});
        for (std::int64_t d = 16; d <= 112; d += 16) {
            cases.push_back({"bf16 paired streaming [3, " + std::to_string(d) + "]", "cpu_paired_streaming", DType::bf16, DType::bf16, {3, d}});
        }
    }
    return cases;
}

// The mechanism itself: one byte past either end of a view faults.
TEST(GuardedMemory, OneBytePastEitherEndFaults) {
    GuardedMemory last(0, 100, Side::last), first(0, 100, Side::first);
    last.element0()[99] = 1;
    first.element0()[0] = 1;
    EXPECT_DEATH(last.element0()[100] = 1, "");
    EXPECT_DEATH(first.element0()[-1] = 1, "");
}

TEST_F(Guard, EveryCpuFamilyBetweenGuardPages) {
    run_both_sides(tail_sweep(), Backend::cpu);
    run_both_sides(kElementCases, Backend::cpu);
    run_both_sides(kStridedCases, Backend::cpu);
    run_both_sides(kPairedCases, Backend::cpu);
    run_both_sides(kFoldedCases, Backend::cpu);
    if (MAGI2NORM_STREAMING_ALIGNMENT > 0) run_both_sides(kStreamingCases, Backend::cpu);
    for (const auto &[family, count] : cases_) std::printf("guard pages: %s, %d cases\n", family.c_str(), count);
    EXPECT_GT(cases_["cpu"], 0);
    // With AVX-512 BF16 the BF16 outputs take its families (the paired ones run with
    // MAGI2NORM_TEST_CPU=no_avx512_bf16).
    EXPECT_GT(cases_[contract::cpu_family_run(DType::bf16, "cpu_paired")], 0);
    if (MAGI2NORM_STREAMING_ALIGNMENT > 0) {
        EXPECT_GT(cases_["cpu_streaming"], 0);
        EXPECT_GT(cases_[contract::cpu_family_run(DType::bf16, "cpu_paired_streaming")], 0);
    }
}

// The OpenCL variants on host views: the host-to-device copies and back read and write only the
// views' elements (negative strides go through contiguous copies first).
TEST_F(Guard, OpenCLHostCopiesBetweenGuardPages) {
    std::string why;
    if (!magi2norm::backend_available(Backend::opencl, &why)) GTEST_SKIP() << "no OpenCL here: " << why;
    run_both_sides(kElementCases, Backend::opencl);
    run_both_sides(kStridedCases, Backend::opencl);
    for (const auto &[family, count] : cases_) std::printf("guard pages: %s, %d cases\n", family.c_str(), count);
}

}  // namespace
}  // namespace guard
