// DLPack interop: tensors from PyTorch, JAX, CuPy and the like, used in place (no copies).
//
//   DLManagedTensor *x = ...;   // e.g. torch.utils.dlpack.to_dlpack(t)
//   magi2norm::forward(norm, x->dl_tensor, magi2norm::Grouping::none(), y->dl_tensor);
//
// The tensors are borrowed: nothing here calls a DLManagedTensor's deleter, which stays with the
// caller. Accepted: float32 (kDLFloat, 32 bits), float16 (kDLFloat, 16) and bfloat16 (kDLBfloat,
// 16), one lane; strides in elements (null means contiguous row-major); byte_offset added to
// data. kDLCPU and kDLCUDAHost (pinned) memory is host memory; kDLCUDA and kDLCUDAManaged memory
// is CUDA device memory, for the cuda backend on the device of the call's context. Anything else
// throws Error (dtype, device or overflow).
#pragma once

#include <dlpack/dlpack.h>

#include <optional>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

// The DType of a DLPack dtype; Error(dtype) for any other.
DType dtype_from_dlpack(DLDataType dtype);
DLDataType dtype_to_dlpack(DType dtype);
// Host or device memory for a DLPack device; Error(device) for any other device type.
Memory memory_from_dlpack(DLDevice device);

// A view of the tensor's data, dtype, shape, strides and memory. The shape and strides are
// copied; the data is not.
ConstTensorView from_dlpack(const DLTensor &tensor);
TensorView from_dlpack_mut(const DLTensor &tensor);
inline ConstTensorView from_dlpack(const DLManagedTensor &tensor) { return from_dlpack(tensor.dl_tensor); }
inline TensorView from_dlpack_mut(const DLManagedTensor &tensor) { return from_dlpack_mut(tensor.dl_tensor); }

// Per-token modality ids from a 1-D int32 tensor with unit stride (Error(dtype), Error(shape) or
// Error(stride) otherwise), borrowed like Grouping::ids.
Grouping grouping_from_dlpack_ids(const DLTensor &ids);

// norm.forward on DLPack tensors. When they are in CUDA device memory and `stream` names no
// backend, the call runs on the cuda backend.
void forward(const RMSNorm &norm, const DLTensor &x, const Grouping &grouping, const DLTensor &out,
             std::optional<DType> out_dtype = std::nullopt, const Stream &stream = {});

}  // namespace magi2norm
