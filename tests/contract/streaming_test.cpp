// Streaming stores (runtime/src/cpu_streaming.cpp) change only how the output reaches memory:
// with a policy that admits every output, every multi-token call takes the sliced, non-temporal path, and
// its bytes, including the gaps a strided output leaves between its elements, must equal those
// of the direct path. The layouts cover the copy's three run lengths: a whole slice (dense
// output), one token (dense tokens, strided token axis) and one row (heads not adjacent).
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
};

class Streaming : public testing::Test {
protected:
    void TearDown() override { magi2norm::set_streaming_policy({}); }
};

TEST_F(Streaming, SameBytesAsOrdinaryStores) {
    Rng rng(47);
    const StreamCase cases[] = {
        {"dense pre-norm bf16", DType::bf16, DType::bf16, {301, 3072}, {301, 3072}, {}},
        {"dense Q/K bf16 -> f32", DType::bf16, DType::f32, {257, 24, 128}, {257, 24, 128}, {}},
        {"token stride 2D", DType::f32, DType::f32, {129, 768}, {129, 2 * 768}, {2 * 768, 1}},
        {"heads apart", DType::bf16, DType::bf16, {65, 24, 128}, {24, 65, 128}, {128, 65 * 128, 1}},
    };
    for (const StreamCase &t : cases) {
        SCOPED_TRACE(t.name);
        const ref::HostTensor x = random_input(t.in, t.x, rng);
        const ref::HostTensor w = random_weight(DType::bf16, {t.x.back()}, rng);
        const magi2norm::RMSNorm norm({t.x.back(), 1e-6f, 1, 1, t.out}, w.view());
        ref::HostTensor direct(t.out, t.out_buffer), streamed(t.out, t.out_buffer);
        direct.fill_bytes(0xAB);
        streamed.fill_bytes(0xAB);

        magi2norm::set_streaming_policy({0, 0, 0});
        norm.forward(x.view(), magi2norm::Grouping::none(), magi2norm::TensorView(direct.data(), t.out, t.x, t.strides));
        magi2norm::set_streaming_policy({1, 0, 0});
        norm.forward(x.view(), magi2norm::Grouping::none(), magi2norm::TensorView(streamed.data(), t.out, t.x, t.strides));
        EXPECT_TRUE(direct.bytes() == streamed.bytes());
    }
}

}  // namespace
}  // namespace contract
