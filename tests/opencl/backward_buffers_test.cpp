// The backward on OpenCL buffers: x, dy, dx, dweight and the ids as the host's cl_mem, on the
// host's queue. The variants are those of host views (whose results the backward suite checks on
// the opencl backend), so a call on buffers must give the bytes of the same call on host memory,
// in place over dy too, and an accumulated dweight the same bytes as on the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backward_case.hpp"
#include "opencl_device.hpp"
#include "throws_error.hpp"

namespace {

using namespace opencl_test;  // NOLINT: the suite's shared names (opencl_device.hpp)

// Whether a buffer's bytes are a host tensor's.
bool same_bytes(const std::vector<unsigned char> &device, const ref::HostTensor &host) {
    return device.size() == host.bytes().size() && std::equal(device.begin(), device.end(), host.bytes().begin());
}

class OpenCLBackward : public testing::Test {
protected:
    void SetUp() override {
        std::string why;
        if (!magi2norm::backend_available(magi2norm::Backend::opencl, &why)) GTEST_SKIP() << why;
        if (!device_.ok()) GTEST_SKIP() << "no OpenCL device for the test's own context";
    }
    magi2norm::BackwardOptions staged() const {
        magi2norm::BackwardOptions o;
        o.stream.backend = magi2norm::Backend::opencl;
        return o;
    }
    Device device_;
};

struct Case {
    const char *name;
    DType x, dy, dx, dweight;
    ref::Shape shape;
    std::int64_t num_modality, num_patterns;
    backward_test::GroupingKind grouping;
};

TEST_F(OpenCLBackward, SameBytesAsHostMemoryInPlaceAndAccumulated) {
    using backward_test::GroupingKind;
    const Case cases[] = {
        {"pre-norm bf16, M = 3 by sizes", DType::bf16, DType::bf16, DType::bf16, DType::bf16, {150, 3072}, 3, 1, GroupingKind::sizes},
        {"Q/K bf16, dy f32, M = 3 by ids", DType::bf16, DType::f32, DType::bf16, DType::f32, {70, 24, 128}, 3, 1, GroupingKind::ids},
        {"patterns f16, M = 2 by ids", DType::f16, DType::f16, DType::f16, DType::f16, {90, 4, 64}, 2, 4, GroupingKind::ids},
        {"singleton f32, P = 4", DType::f32, DType::f32, DType::f32, DType::f32, {40, 1, 64}, 1, 4, GroupingKind::none},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.name);
        const backward_test::Inputs in =
            backward_test::make_inputs(c.x, c.dy, DType::bf16, c.shape, c.num_modality, c.num_patterns, c.grouping, 41);
        const magi2norm::RMSNorm norm(in.config, in.weight.view());
        const backward_test::Result expected = backward_test::run_backward(in, c.dx, c.dweight, staged());
        const std::size_t dweight_bytes = static_cast<std::size_t>(expected.dweight.size()) * magi2norm::dtype_size(c.dweight);
        for (const bool in_place : {false, true}) {
            if (in_place && (c.dx != c.dy || c.num_patterns > 1)) continue;
            SCOPED_TRACE(in_place ? "dx over dy" : "dx apart");
            Buffers buffers;
            cl_mem x_mem = buffers.add(device_.upload(in.x.bytes()));
            cl_mem dy_mem = buffers.add(device_.upload(in.dy.bytes()));
            cl_mem dx_mem = in_place ? dy_mem : buffers.add(device_.upload(std::vector<unsigned char>(expected.dx.bytes().size(), kPoison)));
            cl_mem dweight_mem = buffers.add(device_.upload(std::vector<unsigned char>(dweight_bytes, kPoison)));
            cl_mem ids_mem = in.ids.empty() ? nullptr : buffers.add(device_.upload(bytes_of(in.ids)));
            const magi2norm::Grouping grouping =
                c.grouping == GroupingKind::ids
                    ? magi2norm::Grouping::ids(reinterpret_cast<const std::int32_t *>(ids_mem), c.shape[0], Memory::device)
                    : in.library_grouping();
            magi2norm::BackwardOptions o;
            o.dx_dtype = c.dx;
            o.stream = magi2norm::Stream{magi2norm::Backend::opencl, nullptr, device_.queue()};
            const std::vector<std::int64_t> shape = in.x.shape(), dy_shape = in.dy.shape();
            const magi2norm::TensorView dweight(dweight_mem, c.dweight, {expected.dweight.size()}, {}, Memory::device);
            norm.backward(magi2norm::ConstTensorView(x_mem, c.x, shape, {}, Memory::device),
                          magi2norm::ConstTensorView(dy_mem, c.dy, dy_shape, {}, Memory::device), grouping,
                          magi2norm::TensorView(dx_mem, c.dx, shape, {}, Memory::device), dweight, o);
            ASSERT_EQ(clFinish(device_.queue()), CL_SUCCESS);
            EXPECT_TRUE(same_bytes(device_.download(dx_mem, expected.dx.bytes().size()), expected.dx)) << "dx";
            EXPECT_TRUE(same_bytes(device_.download(dweight_mem, dweight_bytes), expected.dweight)) << "dweight";

            // Accumulated: the gradient added to the values the buffer holds, as on the host.
            if (in_place) continue;
            ref::HostTensor twice = expected.dweight;
            magi2norm::BackwardOptions add = staged();
            add.dx_dtype = c.dx;
            add.accumulate_dweight = true;
            ref::HostTensor dx_host(c.dx, in.x.shape());
            norm.backward(in.x.view(), in.dy.view(), in.library_grouping(), dx_host.view(), twice.view(), add);
            o.accumulate_dweight = true;
            norm.backward(magi2norm::ConstTensorView(x_mem, c.x, shape, {}, Memory::device),
                          magi2norm::ConstTensorView(dy_mem, c.dy, dy_shape, {}, Memory::device), grouping,
                          magi2norm::TensorView(dx_mem, c.dx, shape, {}, Memory::device), dweight, o);
            ASSERT_EQ(clFinish(device_.queue()), CL_SUCCESS);
            EXPECT_TRUE(same_bytes(device_.download(dweight_mem, dweight_bytes), twice)) << "accumulated dweight";
        }
    }
}

// Device views the backward cannot use in place are refused with the problem named, and the
// buffers keep their bytes: a strided dweight, a non-unit stride along d, out-of-range ids.
TEST_F(OpenCLBackward, RefusedCallsLeaveTheBuffersUntouched) {
    const magi2norm::RMSNorm norm({64, 1e-6f, 2, 1, std::nullopt});
    Buffers buffers;
    const std::vector<unsigned char> poison(8 * 128 * 4, kPoison);
    cl_mem x_mem = buffers.add(device_.upload(std::vector<unsigned char>(poison.size(), 0x3f)));
    cl_mem dy_mem = buffers.add(device_.upload(std::vector<unsigned char>(poison.size(), 0x3f)));
    cl_mem dx_mem = buffers.add(device_.upload(poison));
    cl_mem dweight_mem = buffers.add(device_.upload(poison));
    const std::vector<std::int32_t> bad_ids = {0, 1, 2, 0, 1, 0, 1, 0};
    cl_mem ids_mem = buffers.add(device_.upload(bytes_of(bad_ids)));
    magi2norm::BackwardOptions o;
    o.stream = magi2norm::Stream{magi2norm::Backend::opencl, nullptr, device_.queue()};
    const magi2norm::ConstTensorView x(x_mem, DType::f32, {8, 64}, {}, Memory::device), dy(dy_mem, DType::f32, {8, 64}, {}, Memory::device);
    const magi2norm::TensorView dx(dx_mem, DType::f32, {8, 64}, {}, Memory::device);
    const magi2norm::TensorView dweight(dweight_mem, DType::f32, {128}, {}, Memory::device);
    const magi2norm::Grouping sizes = magi2norm::Grouping::sizes({4, 4});
    EXPECT_TRUE(contract::throws_error([&] { norm.backward(x, dy, sizes, dx, magi2norm::TensorView(dweight_mem, DType::f32, {2, 64}, {128, 1}, Memory::device), o); }, ErrorCode::stride, {"dweight"}));
    EXPECT_TRUE(contract::throws_error([&] { norm.backward(magi2norm::ConstTensorView(x_mem, DType::f32, {8, 64}, {128, 2}, Memory::device), dy, sizes, dx, dweight, o); }, ErrorCode::stride, {"unit stride"}));
    EXPECT_TRUE(contract::throws_error([&] { norm.backward(x, dy, magi2norm::Grouping::ids(reinterpret_cast<const std::int32_t *>(ids_mem), 8, Memory::device), dx,
                                    dweight, o); }, ErrorCode::modality_id, {"token 2"}));
    EXPECT_TRUE(device_.download(dx_mem, poison.size()) == poison);
    EXPECT_TRUE(device_.download(dweight_mem, poison.size()) == poison);
}

}  // namespace
