// The result does not depend on the thread count: one thread and two give identical bits (the
// row is the unit of work, so no reduction may be split differently).
#include <gtest/gtest.h>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"

namespace contract {
namespace {

struct ThreadCase {
    const char *name;
    DType in, out;
    ref::Shape x;
    std::int64_t num_modality;
};

class Threads : public testing::Test {
protected:
    // Back to the default for the tests that follow in this process.
    void TearDown() override { magi2norm::set_num_threads(0); }
};

// ctest runs each test in a process of its own, so this asks before any norm has run.
TEST_F(Threads, CountIsKnownBeforeTheFirstCall) {
    EXPECT_GE(magi2norm::num_threads(), 1);
    magi2norm::set_num_threads(1);
    EXPECT_EQ(magi2norm::num_threads(), 1);
}

TEST_F(Threads, OneAndTwoThreadsAgreeBitForBit) {
    Rng rng(31);
    const ThreadCase cases[] = {
        {"pre-norm bf16 M=3", DType::bf16, DType::bf16, {2053, 768}, 3},
        {"QK norm bf16 -> f32", DType::bf16, DType::f32, {257, 24, 128}, 1},
        {"final norm f32 width 12288", DType::f32, DType::f32, {67, 12288}, 1},
        {"f16 odd D", DType::f16, DType::f16, {1001, 7}, 3},
    };
    for (const ThreadCase &t : cases) {
        SCOPED_TRACE(t.name);
        const ref::HostTensor x = random_input(t.in, t.x, rng);
        NormCase c;
        c.x = x.view();
        c.config.dim = t.x.back();
        c.config.num_modality = t.num_modality;
        c.config.out_dtype = t.out;
        c.weight = random_weight(DType::bf16, {t.num_modality * t.x.back()}, rng);
        if (t.num_modality > 1) c.grouping = GroupingSpec::by_ids(random_ids(t.x[0], t.num_modality, rng), t.num_modality);

        magi2norm::set_num_threads(1);
        EXPECT_EQ(magi2norm::num_threads(), 1);
        const ref::HostTensor one = run_library(c);
        magi2norm::set_num_threads(2);
        EXPECT_EQ(magi2norm::num_threads(), 2);
        const ref::HostTensor two = run_library(c);
        EXPECT_TRUE(ref::identical(one.view(), two.view()));
    }
}

}  // namespace
}  // namespace contract
