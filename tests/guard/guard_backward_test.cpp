// The backward between guard pages: x, dy, dx, dweight and the per-token ids each placed with
// its first byte, and in turn its last byte, against a PROT_NONE page, for every CPU backward
// family (cpu_single: one dy row a dx row; cpu: the P dy rows of a singleton-head input added
// into its dx row; cpu_single_streaming: dx by streaming stores) and OpenCL's staging of host
// views where a device answers. Row lengths leave every vector tail; strided, reversed,
// transposed and broadcast views take the runtime's copies; dx over dy in place and an
// accumulated dweight read and write the same guarded bytes. Each call is checked against the
// float64 oracle (B1, B2 in FP32; B3 in the case's dtypes) and runs the family named.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backward_case.hpp"
#include "fault_report.hpp"
#include "guarded_view.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"

namespace guard {
namespace {

using backward_test::GroupingKind;
using magi2norm::Backend;
using magi2norm::DType;

struct BackwardCase {
    std::string what;
    std::string family;  // cpu_single, cpu or cpu_single_streaming
    DType x, dy, dx;
    ref::Shape shape;    // x's
    std::int64_t num_modality = 1, num_patterns = 1;
    GroupingKind grouping = GroupingKind::none;
    ref::Shape x_strides = {}, dy_strides = {}, dx_strides = {}, dweight_strides = {};  // empty: dense
    bool in_place = false;
};

const char *name(DType d) { return magi2norm::dtype_name(d); }

class GuardBackward : public testing::Test {
protected:
    void TearDown() override { magi2norm::set_streaming_policy(magi2norm::default_streaming_policy()); }

    // One call of `c` in `dx_dtype` and `dweight_dtype` on guarded views; returns dx and dweight.
    backward_test::Result call(const BackwardCase &c, const backward_test::Inputs &in, DType dx_dtype, DType dweight_dtype,
                               bool accumulate, const ref::HostTensor &old_dweight, Side side, Backend backend) {
        const magi2norm::RMSNorm norm(in.config, in.weight.view());
        const GuardedView x(in.x, c.x_strides, side);
        GuardedView dy(in.dy, c.dy_strides, side);
        GuardedView dx(ref::HostTensor(dx_dtype, in.x.shape()), c.dx_strides, side);
        GuardedView dweight(old_dweight.cast(dweight_dtype), c.dweight_strides, side);
        std::unique_ptr<GuardedMemory> ids;
        magi2norm::Grouping grouping = in.library_grouping();
        if (c.grouping == GroupingKind::ids) {
            const std::int64_t T = in.x.shape()[0];
            ids = std::make_unique<GuardedMemory>(0, T * 4, side);
            std::memcpy(ids->element0(), in.ids.data(), static_cast<std::size_t>(T) * 4);
            grouping = magi2norm::Grouping::ids(reinterpret_cast<const std::int32_t *>(ids->element0()), T);
        }
        magi2norm::BackwardOptions o;
        o.dx_dtype = dx_dtype;
        o.accumulate_dweight = accumulate;
        o.stream.backend = backend;
        const magi2norm::TensorView dx_view = c.in_place ? magi2norm::TensorView(dy.view.data, dx_dtype, dy.view.shape, dy.view.strides) : dx.view;
        norm.backward(x.view, dy.view, grouping, dx_view, dweight.view, o);
        const std::string ran = magi2norm::last_variant();
        if (backend == Backend::cpu) {
            const std::string expected = "magi2_norm_backward_" + c.family + "_" + name(c.x) + "_" + name(c.dy) + "_" + name(dx_dtype);
            EXPECT_EQ(ran, expected);
        } else {
            EXPECT_NE(ran.find("opencl"), std::string::npos) << ran;
        }
        ++calls_[backend == Backend::cpu ? c.family : "opencl (host views staged)"];
        return {ref::HostTensor::copy_of(dx_view), ref::HostTensor::copy_of(dweight.view)};
    }

    void run(const BackwardCase &c, Side side, Backend backend) {
        const std::string what = c.what + (side == Side::first ? ", first bytes" : ", last bytes") + " on " + magi2norm::backend_name(backend);
        set_running_case(what);
        SCOPED_TRACE(what);
        backward_test::Inputs in =
            backward_test::make_inputs(c.x, c.dy, DType::bf16, c.shape, c.num_modality, c.num_patterns, c.grouping, seed_++);
        // The values the views hold (a broadcast axis holds one token's), for the oracle and the
        // contiguous call.
        in.x = ref::HostTensor::copy_of(GuardedView(in.x, c.x_strides, Side::first).view);
        in.dy = ref::HostTensor::copy_of(GuardedView(in.dy, c.dy_strides, Side::first).view);
        const bool streaming = c.family == "cpu_single_streaming";
        magi2norm::set_streaming_policy(streaming ? magi2norm::StreamingPolicy{1, 0, 0} : magi2norm::StreamingPolicy{0, 0, 0});
        const backward_test::Gradients o = backward_test::oracle(in.problem());
        // FP32 dx (in place only where dy is FP32) and a fresh FP32 dweight: B1 and B2.
        ref::HostTensor zeros(DType::f32, in.weight.shape());
        if (!c.in_place || c.dy == DType::f32) {
            const backward_test::Result f32 = call(c, in, DType::f32, DType::f32, false, zeros, side, backend);
            EXPECT_TRUE(backward_test::b1_close(f32.dx, o));
            EXPECT_TRUE(backward_test::b2_close(f32.dweight, o.dscale, o.dscale_bound));
        }
        // The case's dx dtype with a BF16 dweight accumulated: B3 against the contiguous FP32 call on
        // the same backend.
        magi2norm::BackwardOptions on_backend;
        on_backend.stream.backend = backend;
        const backward_test::Result own = backward_test::run_backward(in, DType::f32, DType::f32, on_backend);
        ref::HostTensor old(DType::bf16, in.weight.shape());
        for (std::int64_t i = 0; i < old.size(); ++i) old.set(i, 0.125f * static_cast<float>(i % 9 - 4));
        const backward_test::Result low = call(c, in, c.dx, DType::bf16, true, old, side, backend);
        if (c.dx == DType::f32) {
            EXPECT_TRUE(backward_test::b1_close(low.dx, o));
        } else {
            EXPECT_TRUE(backward_test::b3_one_ulp(low.dx, own.dx, o.dx, o.dx_terms));
        }
        ref::HostTensor expected(DType::bf16, in.weight.shape());
        for (std::int64_t i = 0; i < expected.size(); ++i) expected.set(i, old.get(i) + own.dweight.get(i));
        EXPECT_TRUE(ref::identical(low.dweight.view(), expected.view()));
    }

    void run_both_sides(const std::vector<BackwardCase> &cases, Backend backend) {
        for (const BackwardCase &c : cases) {
            for (const Side side : {Side::first, Side::last}) run(c, side, backend);
        }
    }

    void print_counts() const {
        for (const auto &[family, count] : calls_) std::printf("guard pages, backward: %s, %d calls\n", family.c_str(), count);
    }

    FaultReport fault_report_;
    std::uint64_t seed_ = 500;
    std::map<std::string, int> calls_;
};

// Every row length to 65 and some past it, in three (x, dy, dx) combinations: each vector
// width's tails of the one-row family.
std::vector<BackwardCase> single_tail_sweep() {
    std::vector<BackwardCase> cases;
    std::vector<std::int64_t> dims;
    for (std::int64_t d = 1; d <= 65; ++d) dims.push_back(d);
    for (std::int64_t d : {127, 129, 255, 1000}) dims.push_back(d);
    for (std::int64_t d : dims) {
        const std::string shape = " [3, " + std::to_string(d) + "]";
        cases.push_back({"f32" + shape, "cpu_single", DType::f32, DType::f32, DType::f32, {3, d}});
        cases.push_back({"bf16" + shape, "cpu_single", DType::bf16, DType::bf16, DType::bf16, {3, d}});
        cases.push_back({"f16, f32 dy -> bf16" + shape, "cpu_single", DType::f16, DType::f32, DType::bf16, {3, d}});
    }
    return cases;
}

// Shapes of the model's kinds, pages exactly, modalities by sizes (an empty one) and by ids (the
// runtime's permuted copies), patterns.
const std::vector<BackwardCase> kSingleCases = {
    {"f32 [2, 1024]: two pages", "cpu_single", DType::f32, DType::f32, DType::f32, {2, 1024}},
    {"bf16 [2, 2048]: two pages", "cpu_single", DType::bf16, DType::bf16, DType::bf16, {2, 2048}},
    {"bf16, f32 dy [3, 24, 128] Q/K", "cpu_single", DType::bf16, DType::f32, DType::bf16, {3, 24, 128}},
    {"bf16, f32 dy [2, 3072] -> f32", "cpu_single", DType::bf16, DType::f32, DType::f32, {2, 3072}},
    {"f16 [5, 777] M = 3 by sizes", "cpu_single", DType::f16, DType::f16, DType::f16, {5, 777}, 3, 1, GroupingKind::sizes},
    {"bf16 [5, 100] M = 3 by ids", "cpu_single", DType::bf16, DType::bf16, DType::bf16, {5, 100}, 3, 1, GroupingKind::ids},
    {"f32, [3, 4, 24] P = 4 M = 2 by ids", "cpu_single", DType::f32, DType::f32, DType::f16, {3, 4, 24}, 2, 4, GroupingKind::ids},
    {"bf16 [4, 33] dx over dy", "cpu_single", DType::bf16, DType::bf16, DType::bf16, {4, 33}, 1, 1, GroupingKind::none, {}, {}, {}, {}, true},
    {"f32 [3, 7] dx over dy", "cpu_single", DType::f32, DType::f32, DType::f32, {3, 7}, 2, 1, GroupingKind::sizes, {}, {}, {}, {}, true},
};

// Strided views, through the runtime's contiguous copies: inner stride 2, tokens reversed,
// transposed, tokens broadcast (stride 0), padded dx rows, a reversed and a strided dweight.
const std::vector<BackwardCase> kStridedCases = {
    {"f32 [3, 100], x inner stride 2", "cpu_single", DType::f32, DType::f32, DType::f32, {3, 100}, 1, 1, GroupingKind::none, {200, 2}},
    {"bf16 [4, 33], dy tokens reversed, dx padded", "cpu_single", DType::bf16, DType::bf16, DType::bf16, {4, 33}, 1, 1,
     GroupingKind::none, {}, {-33, 1}, {40, 1}},
    {"f16, f32 dy [5, 40], x transposed, dweight reversed", "cpu_single", DType::f16, DType::f32, DType::f16, {5, 40}, 1, 1,
     GroupingKind::none, {1, 5}, {}, {}, {-1}},
    {"f32 [6, 24] M = 2, x tokens broadcast, dweight stride 2", "cpu_single", DType::f32, DType::f32, DType::bf16, {6, 24}, 2, 1,
     GroupingKind::sizes, {0, 1}, {}, {}, {2}},
    {"bf16 [4, 2, 16] by ids, dx inner stride 2", "cpu_single", DType::bf16, DType::bf16, DType::f32, {4, 2, 16}, 2, 1,
     GroupingKind::ids, {}, {}, {64, 32, 2}},
    {"bf16, f32 dy [3, 1, 32] P = 4, dy heads reversed", "cpu", DType::bf16, DType::f32, DType::bf16, {3, 1, 32}, 1, 4,
     GroupingKind::none, {}, {128, -32, 1}},
};

// Singleton-head broadcasting: the P dy rows added into one dx row, with each vector tail.
std::vector<BackwardCase> summing_cases() {
    std::vector<BackwardCase> cases;
    for (std::int64_t d : {1, 7, 16, 24, 33, 64, 100, 1024}) {
        const std::string shape = " [3, 1, " + std::to_string(d) + "] P = 4";
        cases.push_back({"f32" + shape, "cpu", DType::f32, DType::f32, DType::f32, {3, 1, d}, 1, 4});
        cases.push_back({"bf16, f32 dy -> bf16" + shape, "cpu", DType::bf16, DType::f32, DType::bf16, {3, 1, d}, 1, 4});
        cases.push_back({"f16" + shape + " M = 2 by sizes", "cpu", DType::f16, DType::f16, DType::f16, {3, 1, d}, 2, 4, GroupingKind::sizes});
    }
    return cases;
}

// Streaming stores of dx: rows of whole 16-element vectors, two pages exactly, dx over dy.
std::vector<BackwardCase> streaming_cases() {
    std::vector<BackwardCase> cases;
    for (std::int64_t d : {16, 32, 48, 112, 784}) {
        const std::string shape = " [3, " + std::to_string(d) + "]";
        cases.push_back({"f32" + shape, "cpu_single_streaming", DType::f32, DType::f32, DType::f32, {3, d}});
        cases.push_back({"bf16" + shape, "cpu_single_streaming", DType::bf16, DType::bf16, DType::bf16, {3, d}});
        cases.push_back({"f16, f32 dy -> f32" + shape, "cpu_single_streaming", DType::f16, DType::f32, DType::f32, {3, d}});
    }
    cases.push_back({"f32 [2, 1024]: two pages", "cpu_single_streaming", DType::f32, DType::f32, DType::f32, {2, 1024}});
    cases.push_back({"bf16 [2, 2048]: two pages", "cpu_single_streaming", DType::bf16, DType::bf16, DType::bf16, {2, 2048}});
    cases.push_back({"bf16, f32 dy [3, 3072] M = 3 by sizes", "cpu_single_streaming", DType::bf16, DType::f32, DType::bf16, {3, 3072}, 3,
                     1, GroupingKind::sizes});
    cases.push_back({"bf16 [3, 48] dx over dy", "cpu_single_streaming", DType::bf16, DType::bf16, DType::bf16, {3, 48}, 1, 1,
                     GroupingKind::none, {}, {}, {}, {}, true});
    return cases;
}

TEST_F(GuardBackward, EveryCpuFamilyBetweenGuardPages) {
    run_both_sides(single_tail_sweep(), Backend::cpu);
    run_both_sides(kSingleCases, Backend::cpu);
    run_both_sides(kStridedCases, Backend::cpu);
    run_both_sides(summing_cases(), Backend::cpu);
    if (MAGI2NORM_STREAMING_ALIGNMENT > 0) run_both_sides(streaming_cases(), Backend::cpu);
    print_counts();
    EXPECT_GT(calls_["cpu_single"], 0);
    EXPECT_GT(calls_["cpu"], 0);
    if (MAGI2NORM_STREAMING_ALIGNMENT > 0) EXPECT_GT(calls_["cpu_single_streaming"], 0);
}

// OpenCL on host views: the staging copies to the device and back, and dweight's, read and
// write only the views' elements.
TEST_F(GuardBackward, OpenCLHostViewsBetweenGuardPages) {
    std::string why;
    if (!magi2norm::backend_available(Backend::opencl, &why)) GTEST_SKIP() << "no OpenCL here: " << why;
    run_both_sides(kSingleCases, Backend::opencl);
    run_both_sides(kStridedCases, Backend::opencl);
    print_counts();
}

}  // namespace
}  // namespace guard
