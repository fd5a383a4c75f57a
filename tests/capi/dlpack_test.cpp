// DLPack tensors in place of views: dtypes, devices, strides and byte offsets honoured, the
// managed tensor borrowed, ids as a DLPack tensor, and a clear Error for anything else.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "magi2norm/dlpack.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"
#include "throws_error.hpp"

namespace {

using contract::throws_error;
using magi2norm::DType;
using magi2norm::ErrorCode;
using magi2norm::Memory;

DLTensor dl_tensor(void *data, DType dtype, std::vector<std::int64_t> &shape, std::int64_t *strides = nullptr,
                   std::uint64_t byte_offset = 0, DLDeviceType device = kDLCPU) {
    return DLTensor{data, DLDevice{device, 0}, static_cast<int>(shape.size()), magi2norm::dtype_to_dlpack(dtype),
                    shape.data(), strides, byte_offset};
}

TEST(DLPack, DTypes) {
    for (DType d : {DType::f32, DType::bf16, DType::f16}) EXPECT_EQ(magi2norm::dtype_from_dlpack(magi2norm::dtype_to_dlpack(d)), d);
    EXPECT_EQ(magi2norm::dtype_from_dlpack(DLDataType{kDLBfloat, 16, 1}), DType::bf16);
    EXPECT_EQ(magi2norm::dtype_from_dlpack(DLDataType{kDLFloat, 16, 1}), DType::f16);
    for (DLDataType bad : {DLDataType{kDLFloat, 64, 1}, DLDataType{kDLFloat, 32, 4}, DLDataType{kDLInt, 32, 1},
                           DLDataType{kDLBfloat, 32, 1}, DLDataType{kDLUInt, 16, 1}}) {
        EXPECT_TRUE(throws_error([&] { magi2norm::dtype_from_dlpack(bad); }, ErrorCode::dtype, {"DLPack dtype"}));
    }
}

TEST(DLPack, Devices) {
    EXPECT_EQ(magi2norm::memory_from_dlpack({kDLCPU, 0}), Memory::host);
    EXPECT_EQ(magi2norm::memory_from_dlpack({kDLCUDAHost, 0}), Memory::host);
    EXPECT_EQ(magi2norm::memory_from_dlpack({kDLCUDA, 1}), Memory::device);
    EXPECT_EQ(magi2norm::memory_from_dlpack({kDLCUDAManaged, 0}), Memory::device);
    for (DLDeviceType bad : {kDLOpenCL, kDLVulkan, kDLMetal, kDLROCM}) {
        EXPECT_TRUE(throws_error([&] { magi2norm::memory_from_dlpack({bad, 0}); }, ErrorCode::device, {"device type"}));
    }
}

TEST(DLPack, ViewKeepsShapeStridesOffsetAndMemory) {
    std::vector<std::int64_t> shape = {3, 5};
    std::int64_t strides[2] = {1, 3};
    char buffer[64];
    const DLTensor host = dl_tensor(buffer, DType::f16, shape, strides, 6);
    const magi2norm::ConstTensorView v = magi2norm::from_dlpack(host);
    EXPECT_EQ(v.data, buffer + 6);
    EXPECT_EQ(v.dtype, DType::f16);
    EXPECT_EQ(v.shape, shape);
    EXPECT_EQ(v.strides, (std::vector<std::int64_t>{1, 3}));
    EXPECT_EQ(v.memory, Memory::host);
    EXPECT_TRUE(magi2norm::from_dlpack_mut(dl_tensor(buffer, DType::f32, shape)).strides.empty());  // contiguous

    // A CUDA device pointer is only offset, never dereferenced.
    void *const device_pointer = reinterpret_cast<void *>(std::uintptr_t{0x7f0000000000});
    const magi2norm::TensorView d = magi2norm::from_dlpack_mut(dl_tensor(device_pointer, DType::bf16, shape, nullptr, 256, kDLCUDA));
    EXPECT_EQ(d.data, static_cast<char *>(device_pointer) + 256);
    EXPECT_EQ(d.memory, Memory::device);
}

TEST(DLPack, ManagedTensorIsBorrowed) {
    static bool deleted = false;
    std::vector<std::int64_t> shape = {2, 4};
    float data[8] = {};
    DLManagedTensor managed{dl_tensor(data, DType::f32, shape), nullptr, [](DLManagedTensor *) { deleted = true; }};
    const magi2norm::ConstTensorView v = magi2norm::from_dlpack(managed);
    const magi2norm::TensorView m = magi2norm::from_dlpack_mut(managed);
    EXPECT_EQ(v.data, data);
    EXPECT_EQ(m.data, data);
    EXPECT_FALSE(deleted);
}

TEST(DLPack, MalformedTensors) {
    std::vector<std::int64_t> shape = {2, 4};
    float data[8] = {};
    DLTensor t = dl_tensor(data, DType::f32, shape);
    t.shape = nullptr;
    EXPECT_TRUE(throws_error([&] { magi2norm::from_dlpack(t); }, ErrorCode::shape, {"null shape"}));
    t = dl_tensor(data, DType::f32, shape);
    t.ndim = -1;
    EXPECT_TRUE(throws_error([&] { magi2norm::from_dlpack(t); }, ErrorCode::shape, {"ndim"}));
    t = dl_tensor(data, DType::f32, shape, nullptr, UINT64_MAX);
    EXPECT_TRUE(throws_error([&] { magi2norm::from_dlpack(t); }, ErrorCode::overflow, {"byte_offset"}));
}

// x [T, 3, 16] bf16 stored head-major ([3, T, 16] in memory) behind a byte offset, written to an
// F32 output whose rows are padded, also behind an offset: both layouts as a framework hands them
// over, checked against the reference on the same strided input.
TEST(DLPack, ForwardHonoursStridesAndByteOffsets) {
    const std::int64_t T = 37, H = 3, D = 16, M = 3, pad = 5;
    contract::Rng rng(7);
    const ref::HostTensor storage = contract::random_input(DType::bf16, {H * T * D + 8}, rng);
    std::vector<std::int64_t> x_shape = {T, H, D};
    std::int64_t x_strides[3] = {D, T * D, 1};
    const std::uint64_t x_offset = 8 * sizeof(std::uint16_t);
    const DLTensor x = dl_tensor(const_cast<void *>(storage.data()), DType::bf16, x_shape, x_strides, x_offset);

    std::vector<float> out(1 + T * H * (D + pad), -7.0f);
    std::int64_t out_strides[3] = {H * (D + pad), D + pad, 1};
    const DLTensor y = dl_tensor(out.data(), DType::f32, x_shape, out_strides, sizeof(float));

    const ref::HostTensor weight = contract::random_weight(DType::bf16, {M, D}, rng);
    const std::vector<std::int32_t> ids = contract::random_ids(T, M, rng);
    std::vector<std::int64_t> ids_shape = {T};
    const DLTensor ids_dl{const_cast<std::int32_t *>(ids.data()), DLDevice{kDLCPU, 0}, 1, DLDataType{kDLInt, 32, 1},
                          ids_shape.data(), nullptr, 0};
    const magi2norm::RMSNorm norm({D, 1e-6f, M, 1, DType::f32}, weight.view());
    magi2norm::forward(norm, x, magi2norm::grouping_from_dlpack_ids(ids_dl), y);

    const magi2norm::ConstTensorView x_view(static_cast<const char *>(storage.data()) + x_offset, DType::bf16, x_shape,
                                            {D, T * D, 1});
    const ref::HostTensor expected = ref::rms_norm({D, 1e-6f, M, 1}, weight.view(), x_view, ids);
    const magi2norm::ConstTensorView y_view(out.data() + 1, DType::f32, x_shape, {H * (D + pad), D + pad, 1});
    EXPECT_TRUE(ref::gate1_close(y_view, expected.view()));
    EXPECT_EQ(out[0], -7.0f);  // before the offset
    EXPECT_EQ(out[1 + D], -7.0f);  // padding
}

TEST(DLPack, IdsTensorMustBeContiguousInt32) {
    std::vector<std::int32_t> ids = {0, 1, 2, 0};
    std::vector<std::int64_t> shape = {4};
    DLTensor t{ids.data(), DLDevice{kDLCPU, 0}, 1, DLDataType{kDLInt, 32, 1}, shape.data(), nullptr, 0};
    const magi2norm::Grouping g = magi2norm::grouping_from_dlpack_ids(t);
    EXPECT_EQ(g.kind(), magi2norm::Grouping::Kind::ids);
    EXPECT_EQ(g.token_ids(), ids.data());
    EXPECT_EQ(g.num_tokens(), 4);

    DLTensor wide = t;
    wide.dtype = DLDataType{kDLInt, 64, 1};
    EXPECT_TRUE(throws_error([&] { magi2norm::grouping_from_dlpack_ids(wide); }, ErrorCode::dtype, {"int32"}));
    std::vector<std::int64_t> matrix = {2, 2};
    DLTensor two_d = t;
    two_d.ndim = 2;
    two_d.shape = matrix.data();
    EXPECT_TRUE(throws_error([&] { magi2norm::grouping_from_dlpack_ids(two_d); }, ErrorCode::shape, {"axes"}));
    std::int64_t stride = 2;
    DLTensor strided = t;
    strided.shape = &shape[0];
    shape[0] = 2;
    strided.strides = &stride;
    EXPECT_TRUE(throws_error([&] { magi2norm::grouping_from_dlpack_ids(strided); }, ErrorCode::stride, {"stride"}));
}

TEST(DLPack, MixedHostAndDeviceTensorsAreRefused) {
    std::vector<std::int64_t> shape = {2, 4};
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const DLTensor host = dl_tensor(x, DType::f32, shape);
    const DLTensor device = dl_tensor(reinterpret_cast<void *>(std::uintptr_t{0x7f0000000000}), DType::f32, shape,
                                      nullptr, 0, kDLCUDA);
    const magi2norm::RMSNorm norm({4});
    EXPECT_TRUE(throws_error([&] { magi2norm::forward(norm, host, magi2norm::Grouping::none(), device); },
                             ErrorCode::device, {"host memory"}));
}

}  // namespace
