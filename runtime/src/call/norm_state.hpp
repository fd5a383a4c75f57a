// What a norm holds once its weight is set, shared by the norm, its copies and its plans: the
// configuration, the scale table in the layouts the variants read, and its device copies.
#pragma once

#include <vector>

#include "../devices/device_scales.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::detail {

struct NormState {
    NormConfig config;
    std::vector<float> scale;         // float32(W(w + 1)), [M][P][D]
    std::vector<float> paired_scale;  // permuted for the paired-word form (paired_word_scale); empty
                                      // when D is not a whole number of its blocks
    mutable DeviceScales device_scales;
};

// The [M][P][D] scale table laid out for the paired-word variants: within each block of
// abi::kSumLanes positions of a row, the scales of the even positions first, then the odd ones
// (element 16 jo + 8 odd + ji is the scale of position 16 jo + 2 ji + odd). Empty when D is not
// a multiple of the block.
std::vector<float> paired_word_scale(const std::vector<float> &scale, std::int64_t dim);

}  // namespace magi2norm::detail
