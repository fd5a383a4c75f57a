// One library norm per weight tensor and version, so that a call does not remake the scale
// (float32(W(w + 1))) from the weight: an optimizer step or load_state_dict bumps the version,
// and the scale is remade then and only then.
#pragma once

#include <cstdint>
#include <memory>

#include <torch/csrc/stable/tensor.h>

#include <magi2norm/magi2norm.hpp>

namespace magi2norm_torch {

// The norm of (weight's current values, config). The cache holds a reference to each weight it
// keeps a norm of (at most kMaxNorms, least recently used evicted), so a freed weight's address
// cannot come back as another tensor's while its entry lives. An inference tensor has no version:
// its norm is kept until clear_norms(), so an in-place write to it under inference mode is not
// seen (what AOTInductor's constants and inference weights never have).
std::shared_ptr<const magi2norm::RMSNorm> norm_for(const torch::stable::Tensor &weight, const magi2norm::NormConfig &config);

// Drops every kept norm and the weights they hold; returns how many there were.
std::int64_t clear_norms();

inline constexpr std::size_t kMaxNorms = 256;

}  // namespace magi2norm_torch
