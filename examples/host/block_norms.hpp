// The norms of one MAGI-2 transformer block with three modalities (video, audio, text), applied
// the way a host applies them: weights loaded from a safetensors checkpoint by key, tokens
// grouped by a dispatcher built from the step's modality mapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <magi2norm/magi2norm.hpp>

namespace block_norms {

// The checkpoint keys of the block's modules start with this.
extern const std::string kLayerPrefix;

// A contiguous host tensor.
struct Tensor {
    Tensor(magi2norm::DType dtype, std::vector<std::int64_t> shape);

    magi2norm::DType dtype;
    std::vector<std::int64_t> shape;
    std::vector<unsigned char> bytes;

    magi2norm::ConstTensorView view() const { return {bytes.data(), dtype, shape}; }
    magi2norm::TensorView view() { return {bytes.data(), dtype, shape}; }
};

// One norm as the example ran it.
struct Step {
    std::string module;                   // relative to kLayerPrefix, e.g. "attention.pre_norm"
    magi2norm::NormConfig config;
    Tensor x;
    std::vector<std::int32_t> modality;   // of each token of x (empty when num_modality == 1)
    Tensor y;                             // in x's token order
};

// Writes a checkpoint holding the block's norm weights (BF16, F32 and F16, of several shapes),
// a few other tensors, and a norm of the next layer.
void write_checkpoint(const std::string &path);
// Loads the block's norms from `checkpoint_path` and runs each on deterministic inputs.
std::vector<Step> run(const std::string &checkpoint_path);
// FNV-1a (64-bit) over the bytes of every output, in order.
std::uint64_t checksum(const std::vector<Step> &steps);

}  // namespace block_norms
