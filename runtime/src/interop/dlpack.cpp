#include "magi2norm/dlpack.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace magi2norm {

namespace {

std::string describe(DLDataType dtype) {
    return "code " + std::to_string(dtype.code) + ", " + std::to_string(dtype.bits) + " bits, " +
           std::to_string(dtype.lanes) + " lanes";
}

std::vector<std::int64_t> axes_of(const std::int64_t *values, int ndim) {
    return values ? std::vector<std::int64_t>(values, values + ndim) : std::vector<std::int64_t>{};
}

// data + byte_offset, refusing a sum past the address space. For CUDA device pointers the same
// arithmetic is valid: a CUdeviceptr is an address in the device's flat space.
void *offset_data(const DLTensor &tensor) {
    const auto base = reinterpret_cast<std::uintptr_t>(tensor.data);
    if (tensor.byte_offset > UINTPTR_MAX - base) {
        throw Error(ErrorCode::overflow, "DLPack byte_offset " + std::to_string(tensor.byte_offset) +
                                             " runs past the end of the address space");
    }
    return reinterpret_cast<void *>(base + static_cast<std::uintptr_t>(tensor.byte_offset));
}

TensorView view_of(const DLTensor &tensor) {
    if (tensor.ndim < 0) throw Error(ErrorCode::shape, "DLPack tensor has ndim " + std::to_string(tensor.ndim));
    if (tensor.ndim > 0 && tensor.shape == nullptr) throw Error(ErrorCode::shape, "DLPack tensor has a null shape");
    return TensorView(offset_data(tensor), dtype_from_dlpack(tensor.dtype), axes_of(tensor.shape, tensor.ndim),
                      axes_of(tensor.strides, tensor.ndim), memory_from_dlpack(tensor.device));
}

}  // namespace

DType dtype_from_dlpack(DLDataType dtype) {
    if (dtype.lanes == 1) {
        if (dtype.code == kDLFloat && dtype.bits == 32) return DType::f32;
        if (dtype.code == kDLFloat && dtype.bits == 16) return DType::f16;
        if (dtype.code == kDLBfloat && dtype.bits == 16) return DType::bf16;
    }
    throw Error(ErrorCode::dtype, "DLPack dtype (" + describe(dtype) + ") is not float32, bfloat16 or float16");
}

DLDataType dtype_to_dlpack(DType dtype) {
    switch (dtype) {
    case DType::f32: return DLDataType{kDLFloat, 32, 1};
    case DType::bf16: return DLDataType{kDLBfloat, 16, 1};
    case DType::f16: return DLDataType{kDLFloat, 16, 1};
    }
    throw Error(ErrorCode::dtype, "unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

Memory memory_from_dlpack(DLDevice device) {
    switch (device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: return Memory::host;
    case kDLCUDA:
    case kDLCUDAManaged: return Memory::device;
    default:
        throw Error(ErrorCode::device, "DLPack device type " + std::to_string(static_cast<int>(device.device_type)) +
                                           " is not CPU or CUDA memory");
    }
}

ConstTensorView from_dlpack(const DLTensor &tensor) { return view_of(tensor); }

TensorView from_dlpack_mut(const DLTensor &tensor) { return view_of(tensor); }

Grouping grouping_from_dlpack_ids(const DLTensor &ids) {
    if (ids.dtype.code != kDLInt || ids.dtype.bits != 32 || ids.dtype.lanes != 1) {
        throw Error(ErrorCode::dtype, "DLPack modality ids (" + describe(ids.dtype) + ") are not int32");
    }
    if (ids.ndim != 1 || ids.shape == nullptr) {
        throw Error(ErrorCode::shape, "DLPack modality ids have " + std::to_string(ids.ndim) + " axes, not 1");
    }
    if (ids.strides != nullptr && ids.strides[0] != 1 && ids.shape[0] > 1) {
        throw Error(ErrorCode::stride, "DLPack modality ids have stride " + std::to_string(ids.strides[0]) + ", not 1");
    }
    return Grouping::ids(static_cast<const std::int32_t *>(offset_data(ids)), ids.shape[0],
                         memory_from_dlpack(ids.device));
}

void forward(const RMSNorm &norm, const DLTensor &x, const Grouping &grouping, const DLTensor &out,
             std::optional<DType> out_dtype, const Stream &stream) {
    const ConstTensorView xv = from_dlpack(x);
    Stream chosen = stream;
    if (!chosen.backend && xv.memory == Memory::device) chosen.backend = Backend::cuda;
    norm.forward(xv, grouping, from_dlpack_mut(out), out_dtype, chosen);
}

}  // namespace magi2norm
