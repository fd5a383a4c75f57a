// What the ops take from the torch they run in: its intra-op threads, its current CUDA stream
// and a tensor's version counter, each through the stable ABI or the AOTI C shim.
#pragma once

#include <cstdint>
#include <optional>

#include <torch/csrc/stable/tensor.h>

#include <magi2norm/magi2norm.hpp>

namespace magi2norm_torch {

// The library's parallel loop on torch's intra-op threads (at::parallel_for through the stable
// ABI), so that a call never starts a second pool beside torch's; and torch's thread count.
magi2norm::ParallelLoop torch_parallel_loop();
int torch_num_threads();

// The current CUDA stream of a device, as a CUstream. The shim's CUDA function lives in
// libtorch_cuda, so it is looked up when first needed: the library loads under a CPU-only torch.
void *current_cuda_stream(std::int32_t device_index);
// Whether the torch in this process has CUDA (the shim function above resolves).
bool torch_has_cuda();

// The tensor's version counter (in-place writes bump it), by the aten::_version op; none for an
// inference tensor (made under torch.inference_mode, or an AOTInductor package's constant).
std::optional<std::int64_t> tensor_version(const torch::stable::Tensor &t);

}  // namespace magi2norm_torch
