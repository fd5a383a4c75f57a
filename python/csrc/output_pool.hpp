// Large CPU outputs in warm blocks: a fresh allocation of an activation's size is an mmap whose
// first write faults every page in (the module's pre-norm forward at T = 4096 took 2.6x as
// long into torch's fresh tensors as from this pool, docs/python.md), so outputs of
// kMinPooledBytes or more come from blocks kept mapped when torch frees them, up to
// MAGI2NORM_POOL_BYTES (4 GiB by default, older sizes evicted). torch owns such a tensor through torch_from_blob with a deleter, which
// torch 2.11 added to the stable ABI: under 2.10 (no such symbol) every output is torch's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <torch/csrc/stable/tensor.h>

namespace magi2norm_torch {

inline constexpr std::size_t kMinPooledBytes = std::size_t{1} << 20;

// A new C-contiguous CPU tensor (float32, bfloat16 or float16) in a pooled block, or none where this torch cannot take one (or
// the output is small): the caller then allocates through torch.
std::optional<torch::stable::Tensor> pooled_cpu_tensor(const std::vector<std::int64_t> &shape,
                                                       torch::headeronly::ScalarType dtype);

// Frees every kept block; returns the bytes freed. Bytes kept now.
std::size_t release_pool();
std::size_t pooled_bytes();

}  // namespace magi2norm_torch
