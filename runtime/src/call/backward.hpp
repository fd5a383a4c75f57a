// The backward call (RMSNorm::backward): its plan (backward_plan.hpp), its variant
// (variant_choice.hpp), the CPU kernel per modality's tokens or the GPU's one call
// (backward_gpu.hpp), and the weight gradient from the partials (backward_partials.hpp).
#pragma once

#include <cstdint>

#include "magi2norm/magi2norm.hpp"
#include "backward_partials.hpp"
#include "norm_state.hpp"

namespace magi2norm::detail {

struct KernelEntry;

// Throws Error naming the problem before anything is written.
void run_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                  const TensorView &dx, const TensorView &dweight, const BackwardOptions &options);

// For the library's tools: the variant run_backward runs for a call (by its form, dtypes, store
// kind and tuning class), and run_backward with `instead` in its place (the tuner's candidates,
// each made for that variant's kind; null: the library's own).
const KernelEntry &backward_kernel(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy,
                                   const Grouping &grouping, const TensorView &dx, const TensorView &dweight,
                                   const BackwardOptions &options);
void run_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                  const TensorView &dx, const TensorView &dweight, const BackwardOptions &options, const KernelEntry *instead);

}  // namespace magi2norm::detail
