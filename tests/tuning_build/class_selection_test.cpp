// Which variant a call takes when the build has a tuning record's class variants (kernels.cpp,
// find_kernel; call_plan.cpp, plan_variants): for each form and store kind, the class variant
// whose dtype pair is the call's and whose bounds hold the norm's D and the call's bytes, else
// the untuned variant, as in a build without a record. The rule is tested on entries made here;
// the build's own table through plan_variants and a real call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "magi2norm/internal.hpp"
#include "reference/host_tensor.hpp"

namespace {

using magi2norm::Backend;
using magi2norm::DType;
using magi2norm::detail::CallBounds;
using magi2norm::detail::CallPlan;
using magi2norm::detail::CallSize;
using magi2norm::detail::Form;
using magi2norm::detail::KernelEntry;

std::int64_t element_bytes(DType d) { return d == DType::f32 ? 4 : 2; }

TEST(ClassBounds, HoldBothEndsOfBothRanges) {
    const CallBounds b{1025, 4096, 262144, 4194303};
    EXPECT_TRUE(b.holds({1025, 262144}));
    EXPECT_TRUE(b.holds({4096, 4194303}));
    EXPECT_FALSE(b.holds({1024, 1 << 20})) << "D below";
    EXPECT_FALSE(b.holds({4097, 1 << 20})) << "D above";
    EXPECT_FALSE(b.holds({3072, 262143})) << "bytes below";
    EXPECT_FALSE(b.holds({3072, 4194304})) << "bytes above";
    EXPECT_TRUE(CallBounds{}.holds({1, 0})) << "the untuned entries' bounds: everything";
    EXPECT_TRUE(CallBounds{}.holds({INT64_MAX, INT64_MAX}));
}

TEST(ServesClass, TheCallsKindWithinTheBounds) {
    const KernelEntry k{Backend::cpu, 0, Form::paired_words, 32, DType::bf16, DType::bf16, nullptr, "t1",
                        1, {1025, 4096, 0, 4194303}};
    const CallSize inside{3072, 16 * 3072 * 4};
    EXPECT_TRUE(serves_class(k, Backend::cpu, DType::bf16, DType::bf16, Form::paired_words, true, inside));
    EXPECT_FALSE(serves_class(k, Backend::opencl, DType::bf16, DType::bf16, Form::paired_words, true, inside));
    EXPECT_FALSE(serves_class(k, Backend::cpu, DType::bf16, DType::f32, Form::paired_words, true, inside)) << "dtype pair";
    EXPECT_FALSE(serves_class(k, Backend::cpu, DType::bf16, DType::bf16, Form::elements, true, inside)) << "form";
    EXPECT_FALSE(serves_class(k, Backend::cpu, DType::bf16, DType::bf16, Form::paired_words, false, inside)) << "stores";
    EXPECT_FALSE(serves_class(k, Backend::cpu, DType::bf16, DType::bf16, Form::paired_words, true, {128, 4096})) << "D";
    EXPECT_FALSE(serves_class(k, Backend::cpu, DType::bf16, DType::bf16, Form::paired_words, true, {3072, 1 << 24})) << "bytes";
    KernelEntry untuned = k;
    untuned.tuning_class = 0;
    untuned.bounds = {};
    EXPECT_FALSE(serves_class(untuned, Backend::cpu, DType::bf16, DType::bf16, Form::paired_words, true, inside))
        << "untuned entries are found by the index, not the scan";
}

// A dense CPU call on host memory, x [tokens, dim] -> out, planned up to its variants; the norm
// has a paired-word scale, so BF16 -> BF16 rows of whole blocks take that form too.
struct Call {
    magi2norm::detail::NormState norm;
    CallPlan plan;
    Call(DType in, DType out, std::int64_t dim, std::int64_t tokens, Backend backend = Backend::cpu) {
        norm.config.dim = dim;
        norm.paired_scale.assign(static_cast<std::size_t>(dim), 1.0f);
        plan.norm = &norm;
        plan.backend = backend;
        plan.layout.extent = {dim, 1, 1, tokens};
        plan.layout.x_stride = plan.layout.out_stride = {1, dim, dim, dim};
        plan.x.dtype = in;
        plan.out.dtype = out;
        plan.x.count = plan.out.count = dim * tokens;
        magi2norm::detail::plan_variants(plan);
    }
    // The planned variant of `k`'s form and store kind; null where the layout has none.
    const KernelEntry *slot_of(const KernelEntry &k) const {
        const auto &slots = k.form == Form::paired_words ? plan.paired_words : plan.elements;
        return slots[k.streaming_alignment > 0 ? 1 : 0];
    }
};

TEST(ClassSelection, AnUntunedBuildPlansItsUntunedVariants) {
    if (!magi2norm::detail::class_kernels().empty()) GTEST_SKIP() << "built with a tuning record";
    const Call pre_norm(DType::bf16, DType::bf16, 3072, 16);
    // On a CPU with AVX-512 BF16 its element form serves BF16 outputs (runtime/src/variants/isa.cpp).
    const std::string elements =
        magi2norm::detail::cpu_runs(magi2norm::detail::Isa::avx512_bf16) ? "magi2_norm_cpu_avx512bf16_" : "magi2_norm_cpu_";
    ASSERT_NE(pre_norm.plan.elements[0], nullptr);
    EXPECT_EQ(pre_norm.plan.elements[0]->name, elements + "bf16_bf16");
    ASSERT_NE(pre_norm.plan.paired_words[0], nullptr);
    EXPECT_STREQ(pre_norm.plan.paired_words[0]->name, "magi2_norm_cpu_paired_bf16_bf16");
    if (pre_norm.plan.elements[1] != nullptr) {
        EXPECT_EQ(pre_norm.plan.elements[1]->name, elements + "streaming_bf16_bf16");
        EXPECT_STREQ(pre_norm.plan.paired_words[1]->name, "magi2_norm_cpu_paired_streaming_bf16_bf16");
    }
    const Call qk(DType::bf16, DType::f32, 128, 4096 * 24);
    EXPECT_STREQ(qk.plan.elements[0]->name, "magi2_norm_cpu_bf16_f32");
    for (const auto *k : {pre_norm.plan.elements[0], pre_norm.plan.elements[1], pre_norm.plan.paired_words[0],
                          pre_norm.plan.paired_words[1], qk.plan.elements[0], qk.plan.elements[1]}) {
        if (k != nullptr) EXPECT_EQ(k->tuning_class, 0) << k->name;
    }
}

// A D in [lo, hi] that every form and store kind can take (whole 16-element blocks, rows a
// multiple of 32 bytes, whatever the streaming alignment), 0 where none is.
std::int64_t plannable_dim(std::int64_t lo, std::int64_t hi) {
    const std::int64_t d = (std::max<std::int64_t>(lo, 16) + 15) / 16 * 16;
    return d <= hi ? d : 0;
}

// The smallest dense call x [tokens, dim] of two tokens or more within a class variant's bounds
// that every form and store kind can take (a call of one dense row takes the one-row form in any
// build); none where the bounds hold no such call (or one past 1 TiB).
struct Geometry {
    std::int64_t dim = 0, tokens = 0, bytes = 0;
};
std::optional<Geometry> call_within(const KernelEntry &k) {
    const std::int64_t dim = plannable_dim(k.bounds.dim_min, k.bounds.dim_max);
    if (dim == 0 || k.bounds.bytes_min > (std::int64_t{1} << 40)) return std::nullopt;
    const std::int64_t row_bytes = dim * (element_bytes(k.in) + element_bytes(k.out));
    const std::int64_t tokens = std::max<std::int64_t>(2, (k.bounds.bytes_min + row_bytes - 1) / row_bytes);
    if (tokens * row_bytes > k.bounds.bytes_max) return std::nullopt;
    return Geometry{dim, tokens, tokens * row_bytes};
}

TEST(ClassSelection, CallsWithinAClassPlanItsVariants) {
    const std::vector<const KernelEntry *> classes = magi2norm::detail::class_kernels();
    if (classes.empty()) GTEST_SKIP() << "built without a tuning record: no class variants";
    for (const KernelEntry *k : classes) {
        SCOPED_TRACE(k->name);
        // A CUDA class is planned by the device's capability, which needs a driver: its PTX is
        // checked by ptxas (label ptx). The backward's classes have a test of their own.
        if (k->backend == Backend::cuda || magi2norm::detail::is_backward(k->form)) continue;
        const std::optional<Geometry> g = call_within(*k);
        if (!g) continue;
        const Call inside(k->in, k->out, g->dim, g->tokens, k->backend);
        const KernelEntry *planned = inside.slot_of(*k);
        ASSERT_NE(planned, nullptr);
        // The first class variant that serves the call: this one, unless classes overlap.
        const CallSize size{g->dim, g->bytes};
        for (const KernelEntry *first : classes) {
            if (serves_class(*first, k->backend, k->in, k->out, k->form, k->streaming_alignment > 0, size)) {
                EXPECT_EQ(planned, first) << planned->name;
                break;
            }
        }
        // Past the D bound the class does not serve.
        if (k->bounds.dim_max < (std::int64_t{1} << 30)) {
            const Call past(k->in, k->out, plannable_dim(k->bounds.dim_max + 1, INT64_MAX), g->tokens, k->backend);
            const KernelEntry *other = past.slot_of(*k);
            if (other != nullptr) EXPECT_NE(other, k) << other->name;
        }
    }
}

TEST(ClassSelection, ARealCallReportsItsClassVariant) {
    const std::vector<const KernelEntry *> classes = magi2norm::detail::class_kernels();
    if (classes.empty()) GTEST_SKIP() << "built without a tuning record: no class variants";
    for (const KernelEntry *k : classes) {
        if (k->streaming_alignment > 0) continue;  // the policy and the output's address decide those
        if (k->backend == Backend::cuda) continue;  // no CUDA device here
        if (magi2norm::detail::is_backward(k->form)) continue;  // ABackwardCall... below
        SCOPED_TRACE(k->name);
        const std::optional<Geometry> g = call_within(*k);
        if (!g || g->bytes > (64 << 20)) continue;
        std::vector<std::uint32_t> x(static_cast<std::size_t>(g->tokens * g->dim)), out(x.size());  // 4-byte aligned
        const magi2norm::RMSNorm norm({g->dim, 1e-6f, 1, 1, k->out});
        magi2norm::CallOptions options;
        options.streaming = magi2norm::StreamingPolicy{0, 0, 0};  // ordinary stores
        const std::vector<std::int64_t> shape = {g->tokens, g->dim};
        options.stream.backend = k->backend;  // a GPU class: host memory staged through its device
        norm.forward(magi2norm::ConstTensorView(x.data(), k->in, shape), magi2norm::Grouping::none(),
                     magi2norm::TensorView(out.data(), k->out, shape), options);
        const std::string ran = magi2norm::last_variant();
        const std::string tag = "_t" + std::to_string(k->tuning_class) + "_";
        EXPECT_NE(ran.find(tag), std::string::npos) << ran;
    }
}

// A backward call (one dy row a dx row, ordinary stores) within a backward class's bounds runs
// the class's variant, and its dx and weight gradient are the untuned variant's bits: the
// backward's knobs move tasks and tiles, never a partial's terms.
TEST(ClassSelection, ABackwardCallWithinAClassRunsItsVariantWithTheUntunedBits) {
    const std::vector<const KernelEntry *> classes = magi2norm::detail::class_kernels();
    if (classes.empty()) GTEST_SKIP() << "built without a tuning record: no class variants";
    int checked = 0;
    for (const KernelEntry *k : classes) {
        if (k->form != Form::backward_single || k->streaming_alignment > 0 || k->backend != Backend::cpu) continue;
        SCOPED_TRACE(k->name);
        const std::int64_t dim = plannable_dim(k->bounds.dim_min, k->bounds.dim_max);
        const std::int64_t row_bytes = dim * (element_bytes(k->in) + element_bytes(k->out) + element_bytes(k->dx));
        const std::int64_t tokens = std::max<std::int64_t>(2, (k->bounds.bytes_min + row_bytes - 1) / row_bytes);
        ASSERT_LE(tokens * row_bytes, k->bounds.bytes_max);
        const std::vector<std::int64_t> shape = {tokens, dim};
        ref::HostTensor x(k->in, shape), dy(k->out, shape);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
        for (std::int64_t i = 0; i < x.size(); ++i) {
            x.set(i, uniform(rng));
            dy.set(i, uniform(rng));
        }
        const magi2norm::RMSNorm norm({dim, 1e-6f, 1, 1, k->out});
        const auto backward = [&](const KernelEntry *instead, ref::HostTensor &dx, ref::HostTensor &dweight) {
            dx = ref::HostTensor(k->dx, shape);
            dx.fill_bytes(0xab);
            dweight = ref::HostTensor(DType::f32, {dim});
            for (std::int64_t i = 0; i < dim; ++i) dweight.set(i, -7.0f);
            magi2norm::BackwardOptions options;
            options.dx_dtype = k->dx;
            magi2norm::detail::run_backward(magi2norm::detail::norm_state_of(norm), x.view(), dy.view(), magi2norm::Grouping::none(),
                                            dx.view(), dweight.view(), options, instead);
        };
        ref::HostTensor dx, untuned_dx, dweight, untuned_dweight;
        backward(nullptr, dx, dweight);
        const std::string ran = magi2norm::last_variant();
        EXPECT_NE(ran.find("_t" + std::to_string(k->tuning_class) + "_"), std::string::npos) << ran;
        const KernelEntry *untuned =
            magi2norm::detail::untuned_kernel(Backend::cpu, k->in, k->out, k->form, false, 0, k->dx);
        ASSERT_NE(untuned, nullptr);
        backward(untuned, untuned_dx, untuned_dweight);
        EXPECT_EQ(magi2norm::last_variant(), untuned->name);
        EXPECT_TRUE(dx.bytes() == untuned_dx.bytes()) << "dx differs from the untuned variant's";
        EXPECT_TRUE(dweight.bytes() == untuned_dweight.bytes()) << "the weight gradient differs from the untuned variant's";
        ++checked;
    }
    if (checked == 0) GTEST_SKIP() << "no CPU backward class in this build's record";
}

}  // namespace
