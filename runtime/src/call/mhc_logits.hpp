// The mHC logits' call (RMSNorm::mhc_logits): its checks, which throw Error naming the problem
// before anything is written, and the one kernel call.
#pragma once

#include "magi2norm/magi2norm.hpp"
#include "norm_state.hpp"

namespace magi2norm::detail {

void run_mhc_logits(const NormState &norm, const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi,
                    const TensorView &logits, const MhcLogitsOptions &options);

}  // namespace magi2norm::detail
