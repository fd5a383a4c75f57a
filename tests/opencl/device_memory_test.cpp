// OpenCL buffers as device tensors: the host owns the context, the command queue and the cl_mem
// buffers (opencl_device.hpp); the norm runs on the host's queue and reads and writes the
// buffers in place. The
// OpenCL variants are the same as for host memory (whose results the contract suite checks on
// the opencl backend), so a call on buffers must give the bytes of the same call on host
// memory, including the gaps a strided output leaves untouched.
#include <CL/cl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "opencl_device.hpp"
#include "random_values.hpp"
#include "throws_error.hpp"

namespace {

using namespace opencl_test;  // NOLINT: the suite's shared names (opencl_device.hpp)

struct Case {
    const char *name;
    DType in, out;
    std::vector<std::int64_t> shape;        // of x and out
    std::vector<std::int64_t> out_strides;  // empty: dense
    std::int64_t out_elements;              // of the output's memory
    std::int64_t num_modality;
    bool ids;                               // grouping by ids (in a cl_mem) rather than sizes
};

class OpenCLBuffers : public testing::Test {
protected:
    void SetUp() override {
        std::string why;
        if (!magi2norm::backend_available(magi2norm::Backend::opencl, &why)) GTEST_SKIP() << why;
        if (!device_.ok()) GTEST_SKIP() << "no OpenCL device for the test's own context";
    }
    Device device_;
};

TEST_F(OpenCLBuffers, SameBytesAsHostMemoryOnTheHostsQueue) {
    const Case cases[] = {
        {"pre-norm bf16, M = 3 by sizes", DType::bf16, DType::bf16, {37, 3072}, {}, 37 * 3072, 3, false},
        {"Q/K bf16 -> f32, M = 3 by ids", DType::bf16, DType::f32, {19, 24, 128}, {}, 19 * 24 * 128, 3, true},
        {"final f32, strided output", DType::f32, DType::f32, {9, 1031}, {2 * 1031, 1}, 9 * 2 * 1031, 1, false},
        {"f16 -> bf16, M = 2 by ids", DType::f16, DType::bf16, {23, 7}, {}, 23 * 7, 2, true},
    };
    contract::Rng rng(2027);
    for (const Case &c : cases) {
        SCOPED_TRACE(c.name);
        const ref::HostTensor x = contract::random_input(c.in, c.shape, rng);
        const ref::HostTensor w = contract::random_weight(DType::bf16, {c.num_modality * c.shape.back()}, rng);
        const magi2norm::RMSNorm norm({c.shape.back(), 1e-6f, c.num_modality, 1, c.out}, w.view());
        const std::vector<std::int32_t> ids = contract::random_ids(c.shape[0], c.num_modality, rng);
        const std::vector<std::int64_t> sizes = contract::bincount(ids, c.num_modality);
        const std::size_t out_bytes = static_cast<std::size_t>(c.out_elements) * magi2norm::dtype_size(c.out);

        // The same call on host memory, staged by the library.
        std::vector<unsigned char> expected(out_bytes, kPoison);
        const magi2norm::Stream staged{magi2norm::Backend::opencl};
        norm.forward(x.view(), c.ids ? magi2norm::Grouping::ids(ids.data(), c.shape[0]) : magi2norm::Grouping::sizes(sizes),
                     magi2norm::TensorView(expected.data(), c.out, c.shape, c.out_strides), std::nullopt, staged);

        // On buffers, once with the context named and once with it taken from the queue.
        for (void *context : {static_cast<void *>(device_.context()), static_cast<void *>(nullptr)}) {
            SCOPED_TRACE(context ? "context named" : "context from the queue");
            Buffers buffers;
            cl_mem x_mem = buffers.add(device_.upload(x.bytes()));
            cl_mem out_mem = buffers.add(device_.upload(std::vector<unsigned char>(out_bytes, kPoison)));
            cl_mem ids_mem = buffers.add(device_.upload(bytes_of(ids)));
            const magi2norm::Grouping grouping =
                c.ids ? magi2norm::Grouping::ids(reinterpret_cast<const std::int32_t *>(ids_mem), c.shape[0], Memory::device)
                      : magi2norm::Grouping::sizes(sizes);
            norm.forward(magi2norm::ConstTensorView(x_mem, c.in, c.shape, {}, Memory::device), grouping,
                         magi2norm::TensorView(out_mem, c.out, c.shape, c.out_strides, Memory::device), std::nullopt,
                         magi2norm::Stream{magi2norm::Backend::opencl, context, device_.queue()});
            ASSERT_EQ(clFinish(device_.queue()), CL_SUCCESS);
            EXPECT_TRUE(device_.download(out_mem, out_bytes) == expected);
            const std::vector<unsigned char> x_after = device_.download(x_mem, x.bytes().size());
            EXPECT_TRUE(std::equal(x_after.begin(), x_after.end(), x.bytes().begin())) << "the input changed";
        }
    }
}

// The call enqueues its kernel on the host's queue and returns without waiting for it: with the
// queue held behind a user event, the call returns and the output stays untouched (read through
// a second queue) until the host releases the event. A call that ran on a queue of its own would
// write at once; one that waited for its work would not return (the test then gives up after 20 s).
TEST_F(OpenCLBuffers, RunsOnTheHostsQueueWithoutWaiting) {
    contract::Rng rng(11);
    const ref::HostTensor x = contract::random_input(DType::bf16, {16, 768}, rng);
    const magi2norm::RMSNorm norm({768, 1e-6f, 1, 1, DType::f32});
    std::vector<unsigned char> expected(16 * 768 * 4, kPoison);
    norm.forward(x.view(), magi2norm::Grouping::none(), magi2norm::TensorView(expected.data(), DType::f32, {16, 768}),
                 std::nullopt, magi2norm::Stream{magi2norm::Backend::opencl});

    Buffers buffers;
    cl_mem x_mem = buffers.add(device_.upload(x.bytes()));
    const std::vector<unsigned char> poison(expected.size(), kPoison);
    cl_mem out_mem = buffers.add(device_.upload(poison));
    cl_int status = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(device_.context(), &status);
    ASSERT_EQ(status, CL_SUCCESS);
    ASSERT_EQ(clEnqueueMarkerWithWaitList(device_.queue(), 1, &gate, nullptr), CL_SUCCESS);

    auto call = std::async(std::launch::async, [&] {
        norm.forward(magi2norm::ConstTensorView(x_mem, DType::bf16, {16, 768}, {}, Memory::device),
                     magi2norm::Grouping::none(), magi2norm::TensorView(out_mem, DType::f32, {16, 768}, {}, Memory::device),
                     std::nullopt, magi2norm::Stream{magi2norm::Backend::opencl, nullptr, device_.queue()});
    });
    const bool returned = call.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    EXPECT_TRUE(returned) << "the call waited for the host's queue";
    if (returned) {
        cl_command_queue reader = clCreateCommandQueue(device_.context(), device_.device(), 0, &status);
        ASSERT_EQ(status, CL_SUCCESS);
        std::vector<unsigned char> early(poison.size());
        EXPECT_EQ(clEnqueueReadBuffer(reader, out_mem, CL_TRUE, 0, early.size(), early.data(), 0, nullptr, nullptr), CL_SUCCESS);
        clReleaseCommandQueue(reader);
        EXPECT_TRUE(early == poison) << "the kernel ran before the host's queue reached it";
    }
    clSetUserEventStatus(gate, CL_COMPLETE);
    call.get();
    clReleaseEvent(gate);
    ASSERT_EQ(clFinish(device_.queue()), CL_SUCCESS);
    EXPECT_TRUE(device_.download(out_mem, expected.size()) == expected);
}

// A norm keeps one device copy of its scale per context: a second context gets its own.
TEST_F(OpenCLBuffers, EachContextGetsItsOwnScale) {
    Device other;
    ASSERT_TRUE(other.ok());
    contract::Rng rng(7);
    const ref::HostTensor x = contract::random_input(DType::f32, {5, 64}, rng);
    const ref::HostTensor w = contract::random_weight(DType::f32, {64}, rng);
    const magi2norm::RMSNorm norm({64, 1e-6f, 1, 1, std::nullopt}, w.view());
    std::vector<unsigned char> expected(x.bytes().size(), kPoison);
    norm.forward(x.view(), magi2norm::Grouping::none(), magi2norm::TensorView(expected.data(), DType::f32, {5, 64}),
                 std::nullopt, magi2norm::Stream{magi2norm::Backend::opencl});
    for (const Device *device : {&device_, &other, &device_}) {
        Buffers buffers;
        cl_mem x_mem = buffers.add(device->upload(x.bytes()));
        cl_mem out_mem = buffers.add(device->upload(std::vector<unsigned char>(expected.size(), kPoison)));
        norm.forward(magi2norm::ConstTensorView(x_mem, DType::f32, {5, 64}, {}, Memory::device), magi2norm::Grouping::none(),
                     magi2norm::TensorView(out_mem, DType::f32, {5, 64}, {}, Memory::device), std::nullopt,
                     magi2norm::Stream{magi2norm::Backend::opencl, nullptr, device->queue()});
        EXPECT_TRUE(device->download(out_mem, expected.size()) == expected);
    }
}

// Refused calls name the problem and leave the output buffer as it was.
TEST_F(OpenCLBuffers, RefusedCallsLeaveTheOutputUntouched) {
    const magi2norm::RMSNorm norm({64, 1e-6f, 1, 1, std::nullopt});
    Buffers buffers;
    const std::vector<unsigned char> poison(5 * 64 * 4, kPoison);
    cl_mem x_mem = buffers.add(device_.upload(std::vector<unsigned char>(poison.size(), 0x3f)));
    cl_mem out_mem = buffers.add(device_.upload(poison));
    const auto x = magi2norm::ConstTensorView(x_mem, DType::f32, {5, 64}, {}, Memory::device);
    const auto out = magi2norm::TensorView(out_mem, DType::f32, {5, 64}, {}, Memory::device);
    const magi2norm::Stream on_queue{magi2norm::Backend::opencl, nullptr, device_.queue()};

    EXPECT_TRUE(contract::throws_error([&] { norm.forward(x, magi2norm::Grouping::none(), out, std::nullopt, {magi2norm::Backend::opencl}); },
                                       ErrorCode::device, {"command queue"}));
    EXPECT_TRUE(contract::throws_error(
        [&] {
            norm.forward(magi2norm::ConstTensorView(out_mem, DType::f32, {5, 64}, {}, Memory::device),
                         magi2norm::Grouping::none(), out, std::nullopt, on_queue);
        },
        ErrorCode::overlap, {"same OpenCL buffer"}));
    EXPECT_TRUE(contract::throws_error(
        [&] {
            norm.forward(magi2norm::ConstTensorView(x_mem, DType::f32, {5, 64}, {-64, 1}, Memory::device),
                         magi2norm::Grouping::none(), out, std::nullopt, on_queue);
        },
        ErrorCode::stride, {">= 0"}));
    EXPECT_TRUE(contract::throws_error(
        [&] { norm.forward(x, magi2norm::Grouping::none(), out, std::nullopt, {magi2norm::Backend::cpu}); },
        ErrorCode::device, {"cuda or opencl"}));
    EXPECT_TRUE(device_.download(out_mem, poison.size()) == poison);
}

// OpenCL checks nothing when a kernel reads or writes past a cl_mem, so the library must: each
// view has to fit in its buffer, per-token ids have to cover every token, and the input and the
// output must not share bytes, also when they are sub-buffers of one parent buffer. Every refusal
// leaves the output untouched; sub-buffers that do not overlap are fine.
TEST_F(OpenCLBuffers, ViewsMustFitTheirBuffersAndNotShareBytes) {
    constexpr std::int64_t kTokens = 5, kDim = 64;
    const magi2norm::RMSNorm norm({kDim, 1e-6f, 2, 1, std::nullopt});
    const magi2norm::Stream on_queue{magi2norm::Backend::opencl, nullptr, device_.queue()};
    const auto input = [](cl_mem mem) { return magi2norm::ConstTensorView(mem, DType::f32, {kTokens, kDim}, {}, Memory::device); };
    const auto output = [](cl_mem mem) { return magi2norm::TensorView(mem, DType::f32, {kTokens, kDim}, {}, Memory::device); };
    const std::size_t view_bytes = kTokens * kDim * sizeof(float);
    // Every x value is 0.5, so every output element is 0.5 / sqrt(0.25 + eps).
    std::vector<float> halves(kTokens * kDim, 0.5f);
    Buffers buffers;
    cl_mem x_mem = buffers.add(device_.upload(bytes_of(halves)));
    const std::vector<unsigned char> poison(view_bytes, kPoison);
    cl_mem out_mem = buffers.add(device_.upload(poison));
    cl_mem short_mem = buffers.add(device_.upload(std::vector<unsigned char>(view_bytes - 4, kPoison)));
    const std::vector<std::int32_t> ids = {0, 1, 0, 1, 1};
    cl_mem ids_mem = buffers.add(device_.upload(bytes_of(ids)));
    cl_mem short_ids_mem = buffers.add(device_.upload(bytes_of(std::vector<std::int32_t>{0, 1})));
    const auto by_ids = [](cl_mem mem, std::int64_t count) {
        return magi2norm::Grouping::ids(reinterpret_cast<const std::int32_t *>(mem), count, Memory::device);
    };

    // An output or an input one element longer than its buffer.
    EXPECT_TRUE(contract::throws_error([&] { norm.forward(input(x_mem), by_ids(ids_mem, kTokens), output(short_mem), std::nullopt, on_queue); },
                                       ErrorCode::shape, {"output", "OpenCL buffer holds"}));
    EXPECT_TRUE(contract::throws_error([&] { norm.forward(input(short_mem), by_ids(ids_mem, kTokens), output(out_mem), std::nullopt, on_queue); },
                                       ErrorCode::shape, {"input", "OpenCL buffer holds"}));
    // Ids: fewer than the tokens, a buffer shorter than the tokens, a null handle.
    EXPECT_TRUE(contract::throws_error([&] { norm.forward(input(x_mem), by_ids(ids_mem, 1), output(out_mem), std::nullopt, on_queue); },
                                       ErrorCode::grouping, {"1 modality ids", "5 tokens"}));
    EXPECT_TRUE(contract::throws_error([&] { norm.forward(input(x_mem), by_ids(short_ids_mem, kTokens), output(out_mem), std::nullopt, on_queue); },
                                       ErrorCode::grouping, {"20 bytes", "holds 8"}));
    EXPECT_TRUE(contract::throws_error([&] { norm.forward(input(x_mem), by_ids(nullptr, kTokens), output(out_mem), std::nullopt, on_queue); },
                                       ErrorCode::null_data, {"ids"}));
    EXPECT_TRUE(device_.download(out_mem, view_bytes) == poison);
    EXPECT_TRUE(device_.download(short_mem, view_bytes - 4) == std::vector<unsigned char>(view_bytes - 4, kPoison));
    // Empty views touch no buffer, so their handles may be null, as on the host.
    EXPECT_NO_THROW(norm.forward(magi2norm::ConstTensorView(nullptr, DType::f32, {0, kDim}, {}, Memory::device),
                                 magi2norm::Grouping::sizes({0, 0}),
                                 magi2norm::TensorView(nullptr, DType::f32, {0, kDim}, {}, Memory::device), std::nullopt, on_queue));

    // Sub-buffers of one parent: x at offset 0, the output one alignment step on (overlapping x)
    // or past x's bytes (apart).
    cl_uint align_bits = 0;
    ASSERT_EQ(clGetDeviceInfo(device_.device(), CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, nullptr), CL_SUCCESS);
    const std::size_t step = align_bits / 8, apart = (view_bytes + step - 1) / step * step;
    std::vector<unsigned char> parent_bytes(apart + view_bytes, kPoison);
    std::memcpy(parent_bytes.data(), halves.data(), view_bytes);
    cl_mem parent = buffers.add(device_.upload(parent_bytes));
    const auto sub = [&](std::size_t origin) {
        const cl_buffer_region region{origin, view_bytes};
        cl_int status = CL_SUCCESS;
        cl_mem mem = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &status);
        EXPECT_EQ(status, CL_SUCCESS);
        return buffers.add(mem);
    };
    cl_mem x_sub = sub(0), overlapping = sub(step), after = sub(apart);
    EXPECT_TRUE(contract::throws_error([&] { norm.forward(input(x_sub), by_ids(ids_mem, kTokens), output(overlapping), std::nullopt, on_queue); },
                                       ErrorCode::overlap, {"same OpenCL buffer"}));
    EXPECT_TRUE(device_.download(parent, parent_bytes.size()) == parent_bytes);
    norm.forward(input(x_sub), by_ids(ids_mem, kTokens), output(after), std::nullopt, on_queue);
    const std::vector<unsigned char> result = device_.download(after, view_bytes);
    std::vector<float> y(kTokens * kDim);
    std::memcpy(y.data(), result.data(), view_bytes);
    const double expected = 0.5 / std::sqrt(0.25 + 1e-6);  // SPEC's formula for a row of 0.5, scale 1
    for (float v : y) ASSERT_NEAR(v, expected, 1e-6 * expected);
}

}  // namespace
