// torch::stable::Tensor as the library sees it: views, dtypes, the grouping tensors and the
// call's device. Stable-ABI code only, so that one build loads in every torch >= 2.10.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/csrc/stable/tensor.h>

#include <magi2norm/magi2norm.hpp>

namespace magi2norm_torch {

using torch::stable::Tensor;

// The library's dtype of a torch dtype; Error(dtype) naming it for any other.
magi2norm::DType dtype_of(torch::headeronly::ScalarType type, const char *what);
torch::headeronly::ScalarType scalar_type_of(magi2norm::DType dtype);
// The library's dtype of a code in magi2norm::DType's order (f32, bf16, f16), as the ops take
// out_dtype; Error(dtype) for another code.
magi2norm::DType dtype_of_code(std::int64_t code);

// A view of a tensor's elements where they are (host, or CUDA device memory).
magi2norm::TensorView view_of(const Tensor &t, const char *what);

// The grouping of a call: group sizes (any integer dtype, any device: read on the host) or
// per-token ids (int32 in x's memory; `held` keeps a converted copy alive for the call).
magi2norm::Grouping grouping_of(const Tensor &x, const std::optional<Tensor> &group_sizes,
                                const std::optional<Tensor> &modality_ids, std::optional<Tensor> &held);

// The library's stream for x's device: the CPU with torch's intra-op threads, or CUDA on the
// current stream of x's device (which the caller makes current).
magi2norm::Stream stream_for(const Tensor &x);

}  // namespace magi2norm_torch
