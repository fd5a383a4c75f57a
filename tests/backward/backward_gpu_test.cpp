// The backward on a GPU backend (MAGI2NORM_BACKEND's when it names one, else OpenCL, which PoCL
// runs here on the CPU): B1-B3 over the model's
// shapes, patterns and broadcasting, dtypes and groupings; the golden gradients; special values
// and empty calls; the same bits over repeated runs, grouping forms, in place and strides; and
// the backward from the GPU forward's inverse RMS.
// Host views, staged through the device by the library.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backward_case.hpp"
#include "reference/gates.hpp"

namespace backward_test {
namespace {

using magi2norm::BackwardOptions;

magi2norm::Backend gpu_backend() {
    const magi2norm::Backend b = magi2norm::default_backend();
    return b == magi2norm::Backend::cpu ? magi2norm::Backend::opencl : b;
}

BackwardOptions on_gpu() {
    BackwardOptions o;
    o.stream.backend = gpu_backend();
    return o;
}

class Gpu : public testing::Test {
protected:
    void SetUp() override {
        std::string why;
        if (!magi2norm::backend_available(gpu_backend(), &why)) GTEST_SKIP() << why;
    }
};

struct GpuCase {
    std::string name;
    ref::Shape shape;
    std::int64_t num_patterns;
    DType x, dy, dx;
    GroupingKind grouping;
};

// Every (x, dy, dx) on an odd row and on patterns; the model's norms (SPEC.md's table, T
// reduced, past one partial block where the rows allow) and singleton-head broadcasting in the
// model's dtypes; each grouping.
std::vector<GpuCase> gpu_cases() {
    struct Shape {
        const char *name;
        ref::Shape shape;
        std::int64_t patterns;
        bool every_dtype;
    };
    const Shape shapes[] = {{"odd", {140, 37}, 1, true},         {"patterns", {130, 4, 64}, 4, true},
                            {"pre_norm", {70, 3072}, 1, false},  {"qk_norm", {70, 24, 128}, 1, false},
                            {"mhc_norm", {20, 12288}, 1, false}, {"singleton", {90, 1, 64}, 4, false}};
    const DType all[] = {DType::f32, DType::bf16, DType::f16};
    const char *grouping_names[] = {"none", "sizes", "ids"};
    std::vector<GpuCase> cases;
    for (const Shape &s : shapes) {
        for (DType x : all) {
            const std::vector<DType> dys = x == DType::f32 ? std::vector<DType>{x} : std::vector<DType>{x, DType::f32};
            for (DType dy : dys) {
                for (DType dx : all) {
                    const bool model_dtypes = (x == DType::bf16 && dx == DType::bf16) || (x == DType::f32 && dx == DType::f32);
                    if (!s.every_dtype && !model_dtypes) continue;
                    for (int g = 0; g < 3; ++g) {
                        const std::string name = std::string(s.name) + "_" + magi2norm::dtype_name(x) + "_" +
                                                 magi2norm::dtype_name(dy) + "_" + magi2norm::dtype_name(dx) + "_" + grouping_names[g];
                        cases.push_back({name, s.shape, s.patterns, x, dy, dx, static_cast<GroupingKind>(g)});
                    }
                }
            }
        }
    }
    return cases;
}

class GpuSweep : public testing::TestWithParam<GpuCase> {
protected:
    void SetUp() override {
        std::string why;
        if (!magi2norm::backend_available(gpu_backend(), &why)) GTEST_SKIP() << why;
    }
};

TEST_P(GpuSweep, B1B2B3) {
    const GpuCase &c = GetParam();
    const std::int64_t m = c.grouping == GroupingKind::none ? 1 : 3;
    const Inputs in = make_inputs(c.x, c.dy, DType::bf16, c.shape, m, c.num_patterns, c.grouping, 3000 + c.shape[0]);
    expect_b1_b2_b3(in, c.dx, on_gpu());
}

INSTANTIATE_TEST_SUITE_P(Model, GpuSweep, testing::ValuesIn(gpu_cases()),
                         [](const testing::TestParamInfo<GpuCase> &info) { return info.param.name; });

// NaN and Inf rows propagate, an empty modality's dscale is 0, and T = 0 writes zeros (or keeps
// an accumulated dweight).
TEST_F(Gpu, SpecialValuesAndEmptyCalls) {
    Inputs in = make_inputs(DType::f32, DType::f32, DType::f32, {80, 64}, 3, 1, GroupingKind::sizes, 5);
    in.sizes = {40, 0, 40};
    in.ids.assign(40, 0);
    in.ids.insert(in.ids.end(), 40, 2);
    in.x.set(10 * 64 + 5, std::nanf(""));
    in.x.set(50 * 64 + 7, INFINITY);
    const Gradients o = oracle(in.problem());
    const Result r = run_backward(in, DType::f32, DType::f32, on_gpu());
    EXPECT_TRUE(b1_close(r.dx, o.dx));
    EXPECT_TRUE(b2_close(r.dweight, o.dscale, o.dscale_bound));
    EXPECT_TRUE(std::isnan(r.dweight.get(0)));
    EXPECT_EQ(r.dweight.get(64), 0.0f);

    Inputs empty = make_inputs(DType::bf16, DType::bf16, DType::f32, {0, 64}, 2, 1, GroupingKind::sizes, 6);
    empty.sizes = {0, 0};
    const magi2norm::RMSNorm norm(empty.config, empty.weight.view());
    ref::HostTensor dx(DType::bf16, {0, 64}), dweight(DType::f32, {128});
    for (std::int64_t i = 0; i < 128; ++i) dweight.set(i, 3.0f);
    BackwardOptions accumulate = on_gpu();
    accumulate.accumulate_dweight = true;
    norm.backward(empty.x.view(), empty.dy.view(), empty.library_grouping(), dx.view(), dweight.view(), accumulate);
    for (std::int64_t i = 0; i < 128; ++i) EXPECT_EQ(dweight.get(i), 3.0f);
}

// Rows whose mean square overflows (OverflowingRows on the CPU): 2^127 everywhere gives dx = 0
// (the second sum overflows too), one infinite x a NaN row (payloads follow the target); the
// CPU's weight gradient.
TEST_F(Gpu, OverflowingRowsAsTheCpu) {
    Inputs in = make_inputs(DType::bf16, DType::f32, DType::f32, {4, 512}, 1, 1, GroupingKind::none, 7);
    for (std::int64_t d = 0; d < 512; ++d) {
        in.x.set(512 + d, 0x1p127f);
        in.x.set(2 * 512 + d, 0x1p127f);
        in.dy.set(512 + d, 1.0f);
    }
    in.x.set(2 * 512 + 9, INFINITY);
    const Result gpu = run_backward(in, DType::f32, DType::f32, on_gpu());
    const Result cpu = run_backward(in, DType::f32, DType::f32);
    for (std::int64_t d = 0; d < 512; ++d) {
        ASSERT_EQ(gpu.dx.get(512 + d), 0.0f) << d;
        ASSERT_TRUE(std::isnan(gpu.dx.get(2 * 512 + d))) << d;
        ASSERT_TRUE(std::isfinite(gpu.dx.get(d))) << d;
    }
    EXPECT_TRUE(ref::identical(gpu.dweight.view(), cpu.dweight.view()));
}

// Repeated runs, ids against sizes on dispatched tensors, dx over dy and strided views (tokens
// reversed, padded rows) all give the same bits.
TEST_F(Gpu, SameBitsAcrossRunsGroupingsInPlaceAndStrides) {
    const Inputs in = make_inputs(DType::bf16, DType::bf16, DType::bf16, {300, 24, 128}, 3, 1, GroupingKind::ids, 10);
    const Result first = run_backward(in, DType::bf16, DType::f32, on_gpu());
    const Result again = run_backward(in, DType::bf16, DType::f32, on_gpu());
    EXPECT_TRUE(ref::identical(again.dx.view(), first.dx.view()));
    EXPECT_TRUE(ref::identical(again.dweight.view(), first.dweight.view()));

    const magi2norm::ModalityDispatcher dispatcher(in.ids.data(), 300, 3);
    Inputs sorted = in;
    dispatcher.dispatch(in.x.view(), sorted.x.view());
    dispatcher.dispatch(in.dy.view(), sorted.dy.view());
    sorted.grouping = GroupingKind::sizes;
    sorted.sizes = dispatcher.group_sizes();
    const Result by_sizes = run_backward(sorted, DType::bf16, DType::f32, on_gpu());
    ref::HostTensor dx_back(DType::bf16, in.x.shape());
    dispatcher.undispatch(by_sizes.dx.view(), dx_back.view());
    EXPECT_TRUE(ref::identical(dx_back.view(), first.dx.view()));
    EXPECT_TRUE(ref::identical(by_sizes.dweight.view(), first.dweight.view()));

    const magi2norm::RMSNorm norm(in.config, in.weight.view());
    ref::HostTensor dy = in.dy, dweight(DType::f32, in.weight.shape());
    BackwardOptions o = on_gpu();
    o.dx_dtype = DType::bf16;
    norm.backward(in.x.view(), dy.view(), in.library_grouping(), dy.view(), dweight.view(), o);
    EXPECT_TRUE(ref::identical(dy.view(), first.dx.view()));
    EXPECT_TRUE(ref::identical(dweight.view(), first.dweight.view()));

    // Tokens reversed in x (a negative stride) and dx rows padded: the views' own bits.
    ref::HostTensor x_reversed(DType::bf16, in.x.shape()), dx_wide(DType::bf16, {300, 24, 160});
    const std::int64_t row = 24 * 128;
    for (std::int64_t t = 0; t < 300; ++t) {
        for (std::int64_t j = 0; j < row; ++j) x_reversed.set((299 - t) * row + j, in.x.get(t * row + j));
    }
    const magi2norm::ConstTensorView x(x_reversed.data_at(299 * row), DType::bf16, {300, 24, 128}, {-row, 128, 1});
    const magi2norm::TensorView dx(dx_wide.data(), DType::bf16, {300, 24, 128}, {24 * 160, 160, 1});
    norm.backward(x, in.dy.view(), in.library_grouping(), dx, dweight.view(), o);
    EXPECT_TRUE(ref::identical(dx, first.dx.view()));
    EXPECT_TRUE(ref::identical(dweight.view(), first.dweight.view()));
}

// Long rows' r is the GPU forward's bit for bit: one row with dy = 1 has dscale = n exactly,
// which the forward on the same backend with a zero weight (scale 1) writes as y.
TEST_F(Gpu, DscaleOfOneRowIsTheGpuForwardsOutput) {
    for (const ref::Shape &shape : {ref::Shape{1, 3072}, ref::Shape{1, 37}, ref::Shape{1, 12288}}) {
        for (DType x : {DType::f32, DType::bf16, DType::f16}) {
            Inputs in = make_inputs(x, DType::f32, DType::f32, shape, 1, 1, GroupingKind::none, 12);
            for (std::int64_t i = 0; i < in.dy.size(); ++i) in.dy.set(i, 1.0f);
            for (std::int64_t i = 0; i < in.weight.size(); ++i) in.weight.set(i, 0.0f);
            const Result r = run_backward(in, DType::f32, DType::f32, on_gpu());
            const magi2norm::RMSNorm norm(in.config, in.weight.view());
            ref::HostTensor y(DType::f32, shape);
            norm.forward(in.x.view(), magi2norm::Grouping::none(), y.view(), DType::f32, magi2norm::Stream{gpu_backend()});
            const magi2norm::ConstTensorView y_row(y.data(), DType::f32, {shape[1]});
            EXPECT_TRUE(ref::identical(r.dweight.view(), y_row)) << ref::format_shape(shape) << " " << magi2norm::dtype_name(x);
        }
    }
}

// Training on the GPU: the forward's inverse RMS is the one its output was scaled by (an FP32
// output is (x * inv) * scale with it, bit for bit), its output the same with it as without, and
// the backward from it gives the same bits as from its own row sums.
TEST_F(Gpu, TrainingInverseRms) {
    struct Case {
        ref::Shape shape;
        std::int64_t modalities, patterns;
        GroupingKind grouping;
    };
    for (const Case &c : {Case{{70, 3072}, 1, 1, GroupingKind::none}, Case{{40, 6, 128}, 3, 1, GroupingKind::ids},
                          Case{{50, 1, 64}, 1, 4, GroupingKind::none}, Case{{90, 37}, 3, 1, GroupingKind::sizes}}) {
        for (DType x : {DType::f32, DType::bf16}) {
            const Inputs in = make_inputs(x, x, DType::bf16, c.shape, c.modalities, c.patterns, c.grouping, 21);
            const std::string what = ref::format_shape(c.shape) + " " + magi2norm::dtype_name(x);
            ref::HostTensor inv, inv32;
            const ref::HostTensor plain = run_forward(in, gpu_backend(), x, nullptr);
            EXPECT_TRUE(ref::identical(run_forward(in, gpu_backend(), x, &inv).view(), plain.view())) << what;
            EXPECT_NE(std::string(magi2norm::last_variant()).find("inverse_rms"), std::string::npos) << magi2norm::last_variant();
            const ref::HostTensor out32 = run_forward(in, gpu_backend(), DType::f32, &inv32);
            EXPECT_TRUE(ref::identical(inv32.view(), inv.view())) << what;
            expect_inverse_rms_of_output(in, out32, inv32);
            BackwardOptions saved = on_gpu();
            saved.inverse_rms = inv.view();
            const Result own = run_backward(in, x, DType::f32, on_gpu()), from_saved = run_backward(in, x, DType::f32, saved);
            EXPECT_TRUE(ref::identical(from_saved.dx.view(), own.dx.view())) << what;
            EXPECT_TRUE(ref::identical(from_saved.dweight.view(), own.dweight.view())) << what;
        }
    }
}

}  // namespace
}  // namespace backward_test
