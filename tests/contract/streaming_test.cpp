// Streaming stores (the cpu_streaming variants, cmake/ir_steps.py) change only how the output
// reaches memory. With a policy that admits every output, a call whose output those variants can
// store aligned takes them (which calls: tests/runtime/streaming_stores_test.cpp), and its bytes,
// including the gaps a strided output leaves between its elements, must equal those of ordinary
// stores. The layouts cover dense rows, a strided token axis and heads that are not adjacent;
// the last two cases cannot be stored aligned (an output starting one element into a line,
// rows of 1031 elements), so they must reach the ordinary variants: the streaming ones would
// refuse them with an error. Every output address gives the same bytes, and none around the
// view. Which variant each call ran is checked through last_variant().
#include <gtest/gtest.h>

#include "norm_case.hpp"
#include "random_values.hpp"

namespace contract {
namespace {

struct StreamCase {
    const char *name;
    DType in, out;
    ref::Shape x;
    ref::Shape out_buffer;             // the memory the output view lives in
    std::vector<std::int64_t> strides;  // of the output view (empty: dense)
    std::int64_t offset = 0;            // of the view's first element in that memory, in elements
    bool aligned = true;                // the streaming-store variants can store it
};

// MAGI2NORM_STREAMING_ALIGNMENT: 0 when the build has no streaming-store variants.
constexpr bool kStreamingVariants = MAGI2NORM_STREAMING_ALIGNMENT > 0;

class Streaming : public testing::Test {
protected:
    void TearDown() override { magi2norm::set_streaming_policy(magi2norm::default_streaming_policy()); }
};

TEST_F(Streaming, SameBytesAsOrdinaryStores) {
    Rng rng(47);
    const StreamCase cases[] = {
        {"dense pre-norm bf16", DType::bf16, DType::bf16, {301, 3072}, {301, 3072}, {}},
        {"dense Q/K bf16 -> f32", DType::bf16, DType::f32, {257, 24, 128}, {257, 24, 128}, {}},
        {"token stride 2D", DType::f32, DType::f32, {129, 768}, {129, 2 * 768}, {2 * 768, 1}},
        {"heads apart", DType::bf16, DType::bf16, {65, 24, 128}, {24, 65, 128}, {128, 65 * 128, 1}},
        {"output one element in", DType::bf16, DType::bf16, {64, 3072}, {64 * 3072 + 1}, {}, 1, false},
        {"rows of 1031", DType::f32, DType::f32, {97, 1031}, {97, 1031}, {}, 0, false},
    };
    // Streaming stores are a CPU path: on a GPU backend (the opencl pass) both calls take its variants.
    const magi2norm::Backend backend = magi2norm::default_backend();
    for (const StreamCase &t : cases) {
        SCOPED_TRACE(t.name);
        const ref::HostTensor x = random_input(t.in, t.x, rng);
        const ref::HostTensor w = random_weight(DType::bf16, {t.x.back()}, rng);
        const magi2norm::RMSNorm norm({t.x.back(), 1e-6f, 1, 1, t.out}, w.view());
        ref::HostTensor direct(t.out, t.out_buffer), streamed(t.out, t.out_buffer);
        direct.fill_bytes(0xAB);
        streamed.fill_bytes(0xAB);

        // BF16 -> BF16 outputs on 4-byte boundaries take the paired-word form, in both flavours.
        const bool paired = backend == magi2norm::Backend::cpu && t.in == DType::bf16 && t.out == DType::bf16 && t.offset % 2 == 0;
        magi2norm::set_streaming_policy({0, 0, 0});
        norm.forward(x.view(), magi2norm::Grouping::none(), magi2norm::TensorView(direct.data_at(t.offset), t.out, t.x, t.strides));
        EXPECT_TRUE(ran_variant(backend, t.in, t.out, false, paired));
        magi2norm::set_streaming_policy({1, 0, 0});
        norm.forward(x.view(), magi2norm::Grouping::none(), magi2norm::TensorView(streamed.data_at(t.offset), t.out, t.x, t.strides));
        EXPECT_TRUE(ran_variant(backend, t.in, t.out, t.aligned && kStreamingVariants && backend == magi2norm::Backend::cpu, paired));
        EXPECT_TRUE(direct.bytes() == streamed.bytes());
    }
}

// The output at every address its dtype allows, from a 64-byte boundary to 62 bytes past it (2-byte
// elements) or 60 (FP32): with streaming stores admitted, each call writes the bytes an ordinary
// call does and none around the view; it streams exactly where its first element is on the
// streaming alignment and its rows are whole lines of it (rows of 1000 elements; one row of
// 1001 is checked by its bytes alone).
TEST_F(Streaming, EveryOutputAlignmentGivesTheSameBytes) {
    if (!kStreamingVariants || magi2norm::default_backend() != magi2norm::Backend::cpu) {
        GTEST_SKIP() << "no CPU streaming-store variants in this run";
    }
    Rng rng(53);
    const std::pair<DType, DType> pairs[] = {
        {DType::bf16, DType::bf16}, {DType::f16, DType::f16}, {DType::bf16, DType::f32}, {DType::f32, DType::f32}, {DType::f32, DType::bf16}};
    for (const auto &[in, out] : pairs) {
        for (const ref::Shape &shape : {ref::Shape{5, 1000}, ref::Shape{1, 1001}}) {
            const ref::HostTensor x = random_input(in, shape, rng);
            const ref::HostTensor w = random_weight(DType::bf16, {shape.back()}, rng);
            const magi2norm::RMSNorm norm({shape.back(), 1e-6f, 1, 1, out}, w.view());
            const std::int64_t elem = static_cast<std::int64_t>(magi2norm::dtype_size(out));
            const std::int64_t count = shape[0] * shape[1], margin = 64 / elem;
            for (std::int64_t offset = 0; offset < 64 / elem; ++offset) {
                SCOPED_TRACE(std::string(magi2norm::dtype_name(in)) + " -> " + magi2norm::dtype_name(out) + " [" +
                             std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "], output " +
                             std::to_string(offset * elem) + " bytes past a 64-byte boundary");
                // HostTensor's memory is 64-byte aligned: offset elements in, one line after.
                ref::HostTensor direct(out, {count + offset + margin}), streamed(out, {count + offset + margin});
                direct.fill_bytes(0xAB);
                streamed.fill_bytes(0xAB);
                magi2norm::set_streaming_policy({0, 0, 0});
                norm.forward(x.view(), magi2norm::Grouping::none(), magi2norm::TensorView(direct.data_at(offset), out, shape));
                magi2norm::set_streaming_policy({1, 0, 0});
                norm.forward(x.view(), magi2norm::Grouping::none(), magi2norm::TensorView(streamed.data_at(offset), out, shape));
                const bool streams = offset * elem % MAGI2NORM_STREAMING_ALIGNMENT == 0 && shape[1] * elem % MAGI2NORM_STREAMING_ALIGNMENT == 0;
                // Rows of 1000 are not whole 16-element blocks: never the paired-word form; the
                // single row takes the one-row form.
                if (shape[0] > 1) ASSERT_TRUE(ran_variant(magi2norm::Backend::cpu, in, out, streams, false));
                ASSERT_TRUE(direct.bytes() == streamed.bytes());
            }
        }
    }
}

}  // namespace
}  // namespace contract
