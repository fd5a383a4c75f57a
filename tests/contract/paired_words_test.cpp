// The paired-word form (the cpu_paired variants: BF16 rows read and written as 32-bit words of
// two elements, with the scale permuted within each 16 positions) is a second formulation of the
// same algorithm, so for every call it takes its bits must equal the element form's, except that
// a NaN may be any NaN (SPEC.md's NaN == NaN): a product or sum of two NaNs is one of them, and
// LLVM may swap the operands, so a row with two NaN payloads may come out with either. The
// element form runs the same values when x and out start two bytes past a word boundary, which
// the paired form refuses; each case runs both ways and compares every output element, the gaps
// of a strided output included. Which variant ran is checked through last_variant(). The gates of
// SPEC.md for these calls are checked by the rest of the suite, which they reach too.
#include <gtest/gtest.h>

#include <cstdlib>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"

namespace contract {
namespace {

struct PairedCase {
    const char *name;
    ref::Shape x;                      // dense, row-major
    std::int64_t num_patterns = 1, num_modality = 1;
    GroupingSpec grouping = GroupingSpec::none();
    std::vector<std::int64_t> out_strides;  // empty: dense
    std::int64_t out_span = 0;              // elements the strided output spans (0: dense)
};

bool on_cpu() { return magi2norm::default_backend() == magi2norm::Backend::cpu; }

// Writes NaN, infinities, subnormals and zeros of both signs over the first elements, so the
// word halves that carry them are decoded and encoded in both positions.
void add_special_values(ref::HostTensor &x) {
    const std::uint16_t specials[] = {0x7fc0, 0xffc1, 0x7f80, 0xff80, 0x0001, 0x8001, 0x0000, 0x8000, 0x7f7f, 0xff7f};
    auto *bits = static_cast<std::uint16_t *>(x.data());
    for (std::size_t i = 0; i < std::size(specials) && static_cast<std::int64_t>(i) < x.size(); ++i) bits[2 * i + 1] = specials[i];
}

TEST(PairedWords, SameBitsAsTheElementForm) {
    Rng rng(71);
    const PairedCase cases[] = {
        {"pre-norm width, M = 3 by sizes", {37, 3072}, 1, 3, GroupingSpec::by_sizes({20, 0, 17})},
        {"mHC width", {9, 12288}},
        {"D = 16, one vector", {5, 16}},
        {"D = 48, a partial sum block, M = 3 by ids", {6, 48}, 1, 3, GroupingSpec::by_ids({2, 0, 1, 1, 2, 0}, 3)},
        {"D = 80, five vectors", {7, 80}},
        {"heads of 128", {11, 24, 128}},
        {"patterns, P = 4", {6, 4, 32}, 4},
        {"one head broadcast against P = 4", {6, 1, 32}, 4},
        {"token-strided output", {13, 64}, 1, 1, GroupingSpec::none(), {192, 1}, 13 * 192},
    };
    for (const PairedCase &t : cases) {
        SCOPED_TRACE(t.name);
        const std::int64_t dim = t.x.back();
        ref::HostTensor x = random_input(DType::bf16, t.x, rng);
        add_special_values(x);
        const ref::HostTensor w = random_weight(DType::bf16, {t.num_modality * t.num_patterns * dim}, rng);
        const magi2norm::RMSNorm norm({dim, 1e-6f, t.num_modality, t.num_patterns}, w.view());
        const ref::Shape out_shape = ref::output_shape(t.x, t.num_patterns);
        const std::int64_t span = t.out_span > 0 ? t.out_span : ref::num_elements(out_shape);

        // Paired: the views at the start of their 64-byte aligned storage.
        ref::HostTensor paired_out(DType::bf16, {span});
        paired_out.fill_bytes(0xAB);
        norm.forward(x.view(), t.grouping.library(), magi2norm::TensorView(paired_out.data(), DType::bf16, out_shape, t.out_strides));
        EXPECT_TRUE(ran_variant(magi2norm::default_backend(), DType::bf16, DType::bf16, false, on_cpu()));

        // Element form: the same values one element (two bytes) further in.
        const ref::HostTensor element_out = forward_off_word_boundary(norm, x, t.grouping.library(), out_shape, t.out_strides, span);
        EXPECT_TRUE(ran_variant(magi2norm::default_backend(), DType::bf16, DType::bf16, false, false));

        EXPECT_TRUE(ref::identical(paired_out.view(), element_out.view()));
    }
}

// Which BF16 -> BF16 calls take the paired form (kernels.cpp, takes_paired_words).
TEST(PairedWords, TakesDenseRowsOfWholeVectorsOnWordBoundaries) {
    Rng rng(72);
    const bool cpu = on_cpu();
    struct Routing {
        const char *name;
        std::int64_t dim;
        std::int64_t x_offset, out_offset;  // elements into 64-byte aligned storage
        std::int64_t x_token_stride;        // 0: dense; negative: tokens in reverse order
        bool paired;
    };
    const Routing cases[] = {
        {"dense, D = 64", 64, 0, 0, 0, true},
        {"both one word in", 64, 2, 2, 0, true},
        {"even token stride", 64, 0, 0, 66, true},
        {"D = 24: not whole vectors", 24, 0, 0, 0, false},
        {"D = 40: not whole vectors", 40, 0, 0, 0, false},
        {"x off a word boundary", 64, 1, 0, 0, false},
        {"out off a word boundary", 64, 0, 1, 0, false},
        {"odd token stride", 64, 0, 0, 65, false},
        {"tokens reversed", 64, 4 * 64, 0, -64, true},
    };
    for (const Routing &r : cases) {
        SCOPED_TRACE(r.name);
        const std::int64_t tokens = 5, stride = r.x_token_stride > 0 ? r.x_token_stride : r.dim;
        const ref::HostTensor x = random_input(DType::bf16, {r.x_offset + tokens * std::abs(stride)}, rng);
        ref::HostTensor out(DType::bf16, {r.out_offset + tokens * r.dim});
        const magi2norm::RMSNorm norm({r.dim, 1e-6f, 1, 1});
        norm.forward(magi2norm::ConstTensorView(x.data_at(r.x_offset), DType::bf16, {tokens, r.dim}, {stride, 1}),
                     magi2norm::Grouping::none(), magi2norm::TensorView(out.data_at(r.out_offset), DType::bf16, {tokens, r.dim}));
        EXPECT_TRUE(ran_variant(magi2norm::default_backend(), DType::bf16, DType::bf16, false, r.paired && cpu));
    }
    // Other dtype pairs keep the element form.
    const ref::HostTensor x = random_input(DType::bf16, {4, 64}, rng);
    ref::HostTensor out32(DType::f32, {4, 64});
    magi2norm::RMSNorm({64, 1e-6f, 1, 1}).forward(x.view(), magi2norm::Grouping::none(), out32.view(), DType::f32);
    EXPECT_TRUE(ran_variant(magi2norm::default_backend(), DType::bf16, DType::f32, false, false));
}

}  // namespace
}  // namespace contract
