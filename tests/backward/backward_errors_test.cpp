// Every bad backward call is refused with its ErrorCode and a message naming the problem, and
// writes nothing: dx and dweight keep their bytes.
#include <gtest/gtest.h>

#include <string>

#include "backward_case.hpp"

namespace backward_test {
namespace {

using magi2norm::ConstTensorView;
using magi2norm::ErrorCode;
using magi2norm::TensorView;

struct Call {
    Inputs in = make_inputs(DType::bf16, DType::bf16, DType::f32, {20, 4, 32}, 2, 4, GroupingKind::sizes, 3);
    ref::HostTensor dx{DType::bf16, {20, 4, 32}}, dweight{DType::f32, {256}};
    Call() {
        dx.fill_bytes(0xab);
        dweight.fill_bytes(0xcd);
    }
    ConstTensorView x() const { return in.x.view(); }
    ConstTensorView dy() const { return in.dy.view(); }
};

void expect_refused(Call &c, const ConstTensorView &x, const ConstTensorView &dy, const magi2norm::Grouping &grouping,
                    const TensorView &dx, const TensorView &dweight, ErrorCode code, const std::string &needle,
                    const magi2norm::BackwardOptions &options = {}) {
    const magi2norm::RMSNorm norm(c.in.config, c.in.weight.view());
    try {
        norm.backward(x, dy, grouping, dx, dweight, options);
        ADD_FAILURE() << "not refused: " << needle;
    } catch (const magi2norm::Error &e) {
        EXPECT_EQ(e.code(), code) << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    for (unsigned char b : c.dx.bytes()) ASSERT_EQ(b, 0xab) << "dx written";
    for (unsigned char b : c.dweight.bytes()) ASSERT_EQ(b, 0xcd) << "dweight written";
}

TEST(BackwardErrors, DyShape) {
    Call c;
    const ConstTensorView dy(c.in.dy.data(), DType::bf16, {20, 2, 32});
    expect_refused(c, c.x(), dy, c.in.library_grouping(), c.dx.view(), c.dweight.view(), ErrorCode::shape, "dy shape");
}

TEST(BackwardErrors, DyDtype) {
    Call c;
    const ConstTensorView dy(c.in.dy.data(), DType::f16, c.in.dy.shape());
    expect_refused(c, c.x(), dy, c.in.library_grouping(), c.dx.view(), c.dweight.view(), ErrorCode::dtype,
                   "must be bf16 or f32 (");
    // An FP32 input's forward writes FP32 only: the message names one dtype.
    const ref::HostTensor x32 = c.in.x.cast(DType::f32);
    const ConstTensorView dy_bf16(c.in.dy.data(), DType::bf16, c.in.dy.shape());
    magi2norm::BackwardOptions bf16_dx;
    bf16_dx.dx_dtype = DType::bf16;
    expect_refused(c, x32.view(), dy_bf16, c.in.library_grouping(), c.dx.view(), c.dweight.view(), ErrorCode::dtype,
                   "must be f32 (", bf16_dx);
}

TEST(BackwardErrors, DxShapeAndDtype) {
    Call c;
    const TensorView narrow(c.dx.data(), DType::bf16, {20, 2, 32});
    expect_refused(c, c.x(), c.dy(), c.in.library_grouping(), narrow, c.dweight.view(), ErrorCode::shape, "dx shape");
    magi2norm::BackwardOptions f32;
    f32.dx_dtype = DType::f32;
    expect_refused(c, c.x(), c.dy(), c.in.library_grouping(), c.dx.view(), c.dweight.view(), ErrorCode::dtype, "dx dtype", f32);
}

TEST(BackwardErrors, DweightSize) {
    Call c;
    const TensorView short_dw(c.dweight.data(), DType::f32, {255});
    expect_refused(c, c.x(), c.dy(), c.in.library_grouping(), c.dx.view(), short_dw, ErrorCode::weight, "dweight has 255");
}

TEST(BackwardErrors, Grouping) {
    Call c;
    expect_refused(c, c.x(), c.dy(), magi2norm::Grouping::sizes({10, 9}), c.dx.view(), c.dweight.view(), ErrorCode::grouping,
                   "group sizes sum");
    expect_refused(c, c.x(), c.dy(), magi2norm::Grouping::none(), c.dx.view(), c.dweight.view(), ErrorCode::grouping, "no grouping");
    std::vector<std::int32_t> ids(20, 0);
    ids[7] = 2;
    expect_refused(c, c.x(), c.dy(), magi2norm::Grouping::ids(ids.data(), 20), c.dx.view(), c.dweight.view(),
                   ErrorCode::modality_id, "token 7");
}

TEST(BackwardErrors, NullData) {
    Call c;
    const ConstTensorView dy(nullptr, DType::bf16, c.in.dy.shape());
    expect_refused(c, c.x(), dy, c.in.library_grouping(), c.dx.view(), c.dweight.view(), ErrorCode::null_data, "dy");
}

TEST(BackwardErrors, SelfAliasingDx) {
    Call c;
    const TensorView aliased(c.dx.data(), DType::bf16, {20, 4, 32}, {0, 32, 1});
    expect_refused(c, c.x(), c.dy(), c.in.library_grouping(), aliased, c.dweight.view(), ErrorCode::stride, "dx");
}

// dx may be dy itself; any other sharing is refused.
TEST(BackwardErrors, Overlaps) {
    Call c;
    // dx over x.
    ref::HostTensor x = c.in.x;
    const TensorView dx_on_x(x.data(), DType::bf16, x.shape());
    {
        const magi2norm::RMSNorm norm(c.in.config, c.in.weight.view());
        EXPECT_THROW(norm.backward(x.view(), c.dy(), c.in.library_grouping(), dx_on_x, c.dweight.view()), magi2norm::Error);
    }
    // dx over dy shifted by one row: not dy itself.
    ref::HostTensor dy(DType::bf16, {21, 4, 32});
    const ConstTensorView dy_view(dy.data(), DType::bf16, {20, 4, 32});
    const TensorView dx_shifted(dy.data_at(32), DType::bf16, {20, 4, 32});
    expect_refused(c, c.x(), dy_view, c.in.library_grouping(), dx_shifted, c.dweight.view(), ErrorCode::overlap, "dx and dy");
    // dweight inside dy.
    Call d;
    const TensorView dw_in_dy(d.in.dy.data(), DType::bf16, {256});
    expect_refused(d, d.x(), d.dy(), d.in.library_grouping(), d.dx.view(), dw_in_dy, ErrorCode::overlap, "dweight");
}

// Views in different memories, and device memory on the CPU backend, are refused naming it.
TEST(BackwardErrors, Memory) {
    Call c;
    ConstTensorView x = c.x();
    x.memory = magi2norm::Memory::device;
    expect_refused(c, x, c.dy(), c.in.library_grouping(), c.dx.view(), c.dweight.view(), ErrorCode::device, "host memory");
    Call d;
    magi2norm::BackwardOptions cpu;
    cpu.stream.backend = magi2norm::Backend::cpu;
    const auto on_device = [](auto view) {
        view.memory = magi2norm::Memory::device;
        return view;
    };
    expect_refused(d, on_device(d.x()), on_device(d.dy()), d.in.library_grouping(), on_device(d.dx.view()),
                   on_device(d.dweight.view()), ErrorCode::device, "cuda or opencl", cpu);
}

}  // namespace
}  // namespace backward_test
