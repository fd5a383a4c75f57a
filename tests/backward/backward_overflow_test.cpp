// Rows whose FP32 mean square overflows: SPEC.md makes r = 0, so n = 0 for every finite element,
// mean(g n) = 0 and dx = r (g - n mean) = 0, and the row adds nothing to dscale; one infinite
// element makes mean(g n) NaN (0 x inf), so every dx of its row NaN. Near FP32's largest values
// the second row sum sum(g xf) (docs/backward.md: mean(g n) taken as r sum(g xf) / D) overflows
// too, and r sum(g xf) would be 0 x inf: the kernel counts such a row's non-finite elements instead.
#include <gtest/gtest.h>

#include <cmath>

#include "backward_case.hpp"

namespace backward_test {
namespace {

void expect_zero_dx_for_huge_row(float value, std::int64_t dim, DType x_dtype) {
    Inputs in = make_inputs(x_dtype, x_dtype, DType::f32, {4, dim}, 1, 1, GroupingKind::none, 40);
    for (std::int64_t d = 0; d < dim; ++d) {
        in.x.set(dim + d, value);
        in.dy.set(dim + d, 1.0f);
    }
    const Gradients o = oracle(in.problem());
    const Result r = run_backward(in, DType::f32, DType::f32);
    for (std::int64_t d = 0; d < dim; ++d) ASSERT_EQ(o.dx[dim + d], 0.0);
    EXPECT_TRUE(b1_close(r.dx, o)) << "x row of " << value << ", D = " << dim << ", " << magi2norm::dtype_name(x_dtype);
    EXPECT_TRUE(b2_close(r.dweight, o.dscale, o.dscale_bound));
}

// Squares past FP32's range, the second sum within it: dx = 0.
TEST(OverflowingRows, MeanSquareOverflows) {
    for (const DType x : {DType::f32, DType::bf16}) {
        for (const float value : {0x1p70f, 0x1p100f, 0x1p120f}) expect_zero_dx_for_huge_row(value, 512, x);
    }
}

// 2^127 in every element of a row of 512 (or 12288), f32 or bf16, dy = 1: the second sum
// overflows too.
TEST(OverflowingRows, MeanSquareAndSecondSumOverflow) {
    for (const DType x : {DType::f32, DType::bf16}) {
        for (const std::int64_t dim : {512, 12288}) expect_zero_dx_for_huge_row(0x1p127f, dim, x);
    }
}

// The same rows with one infinite x or dy element: mean(g n) is NaN, so is every dx of the row.
TEST(OverflowingRows, AnInfiniteElementMakesTheRowNaN) {
    const std::int64_t dim = 512;
    for (const DType x : {DType::f32, DType::bf16}) {
        for (const bool infinite_x : {true, false}) {
            Inputs in = make_inputs(x, x, DType::f32, {4, dim}, 1, 1, GroupingKind::none, 41);
            for (std::int64_t d = 0; d < dim; ++d) {
                in.x.set(dim + d, 0x1p127f);
                in.dy.set(dim + d, 1.0f);
            }
            (infinite_x ? in.x : in.dy).set(dim + 7, -INFINITY);
            const Gradients o = oracle(in.problem());
            const Result r = run_backward(in, DType::f32, DType::f32);
            for (std::int64_t d = 0; d < dim; ++d) {
                ASSERT_TRUE(std::isnan(o.dx[dim + d]));
                ASSERT_TRUE(std::isnan(r.dx.get(dim + d))) << "d = " << d << (infinite_x ? ", x" : ", dy") << " infinite, " << magi2norm::dtype_name(x);
            }
            for (std::int64_t d = 0; d < dim; ++d) ASSERT_FALSE(std::isnan(r.dx.get(d))) << "the row before stays finite";
        }
    }
}

}  // namespace
}  // namespace backward_test
