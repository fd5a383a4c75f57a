// Streaming stores of dx (the cpu_single_streaming variants, cmake/ir_steps.py) change
// only how dx reaches memory. With a policy that admits every dx, a call whose dx those variants
// can store aligned takes them, and its dx (the bytes between a strided view's elements too) and
// dweight equal, bit for bit, those of the policy that admits none, and B1-B3 hold. A dx they
// cannot store aligned (one element into a line, rows not a multiple of abi::kStreamingLanes)
// and singleton-head broadcasting run the ordinary variants, as the streaming ones would refuse
// them with an error. Which variant ran is checked through last_variant().
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "backward_case.hpp"
#include "reference/gates.hpp"

namespace backward_test {
namespace {

// MAGI2NORM_STREAMING_ALIGNMENT: 0 when the build has no streaming-store variants.
constexpr bool kStreamingVariants = MAGI2NORM_STREAMING_ALIGNMENT > 0;

bool ran_streaming() { return std::strstr(magi2norm::last_variant(), "_streaming_") != nullptr; }

struct StreamCase {
    const char *name;
    ref::Shape shape;
    std::int64_t patterns;
    DType x, dy, dx;
    GroupingKind grouping;
    std::int64_t offset;           // of dx's first element in its memory, in elements
    std::optional<bool> streams;   // whether the streaming variant runs (unset: either may)
};

class BackwardStreaming : public testing::Test {
protected:
    void TearDown() override { magi2norm::set_streaming_policy(magi2norm::default_streaming_policy()); }
};

// dx and dweight of `in` with dx at `offset` elements into fresh memory filled with 0xAB.
struct Written {
    ref::HostTensor memory, dweight;
};
Written run_at(const Inputs &in, DType dx_dtype, std::int64_t offset) {
    const magi2norm::RMSNorm norm(in.config, in.weight.view());
    ref::Shape dx_shape = in.x.shape();
    Written r{ref::HostTensor(dx_dtype, {in.x.size() + offset}), ref::HostTensor(DType::f32, in.weight.shape())};
    r.memory.fill_bytes(0xAB);
    magi2norm::BackwardOptions o;
    o.dx_dtype = dx_dtype;
    norm.backward(in.x.view(), in.dy.view(), in.library_grouping(), magi2norm::TensorView(r.memory.data_at(offset), dx_dtype, dx_shape),
                  r.dweight.view(), o);
    return r;
}

TEST_F(BackwardStreaming, SameBitsAsOrdinaryStores) {
    const StreamCase cases[] = {
        {"pre-norm bf16 by sizes", {150, 3072}, 1, DType::bf16, DType::bf16, DType::bf16, GroupingKind::sizes, 0, true},
        {"Q/K bf16, f32 dy", {70, 24, 128}, 1, DType::bf16, DType::f32, DType::bf16, GroupingKind::none, 0, true},
        {"Q/K by ids (dense copies)", {70, 24, 128}, 1, DType::bf16, DType::f32, DType::bf16, GroupingKind::ids, 0, {}},
        {"mHC bf16, f32 dy", {66, 12288}, 1, DType::bf16, DType::f32, DType::bf16, GroupingKind::none, 0, true},
        {"final norm f32", {20, 12288}, 1, DType::f32, DType::f32, DType::f32, GroupingKind::none, 0, true},
        {"patterns f16 -> f32", {40, 4, 64}, 4, DType::f16, DType::f32, DType::f32, GroupingKind::sizes, 0, true},
        {"dx one element in", {64, 3072}, 1, DType::bf16, DType::bf16, DType::bf16, GroupingKind::none, 1, false},
        {"rows of 1032", {50, 1032}, 1, DType::f32, DType::f32, DType::f32, GroupingKind::none, 0, false},
        {"singleton-head broadcasting", {60, 1, 64}, 4, DType::bf16, DType::f32, DType::bf16, GroupingKind::none, 0, false},
    };
    std::uint64_t seed = 70;
    for (const StreamCase &c : cases) {
        SCOPED_TRACE(c.name);
        const std::int64_t m = c.grouping == GroupingKind::none ? 1 : 3;
        const Inputs in = make_inputs(c.x, c.dy, DType::bf16, c.shape, m, c.patterns, c.grouping, seed++);
        magi2norm::set_streaming_policy({0, 0, 0});
        const Written ordinary = run_at(in, c.dx, c.offset);
        EXPECT_FALSE(ran_streaming()) << magi2norm::last_variant();
        magi2norm::set_streaming_policy({1, 0, 0});
        const Written streamed = run_at(in, c.dx, c.offset);
        if (c.streams) EXPECT_EQ(ran_streaming(), *c.streams && kStreamingVariants) << magi2norm::last_variant();
        EXPECT_TRUE(ordinary.memory.bytes() == streamed.memory.bytes());
        EXPECT_TRUE(ref::identical(ordinary.dweight.view(), streamed.dweight.view()));
        expect_b1_b2_b3(in, c.dx);
    }
}

// dx over dy in place, from memory: the streaming variant reads each dy vector before it
// overwrites it, as the ordinary one does.
TEST_F(BackwardStreaming, InPlaceOverDy) {
    const Inputs in = make_inputs(DType::bf16, DType::bf16, DType::f32, {130, 3072}, 1, 1, GroupingKind::none, 80);
    magi2norm::set_streaming_policy({0, 0, 0});
    const Result expected = run_backward(in, DType::bf16, DType::f32);
    magi2norm::set_streaming_policy({1, 0, 0});
    const magi2norm::RMSNorm norm(in.config, in.weight.view());
    ref::HostTensor dy = in.dy, dweight(DType::f32, in.weight.shape());
    magi2norm::BackwardOptions o;
    o.dx_dtype = DType::bf16;
    norm.backward(in.x.view(), dy.view(), in.library_grouping(), dy.view(), dweight.view(), o);
    EXPECT_EQ(ran_streaming(), kStreamingVariants) << magi2norm::last_variant();
    EXPECT_TRUE(ref::identical(dy.view(), expected.dx.view()));
    EXPECT_TRUE(ref::identical(dweight.view(), expected.dweight.view()));
}

}  // namespace
}  // namespace backward_test
