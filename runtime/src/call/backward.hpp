// The backward call (RMSNorm::backward): the forward's checks of the views and the grouping plus
// dy's and dweight's, the kernel per modality's tokens, and the weight gradient's fixed-order sum.
#pragma once

#include <cstdint>

#include "magi2norm/magi2norm.hpp"
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

// Tokens per block of the weight gradient's partial sums, a function of the shape only, never of
// the thread count or the backend, for tokens that add `rows` products (heads a pattern x middle
// rows) to each scale row: max(1, abi::kPartialTerms / rows) (backward_abi.h), so an FP32 partial
// adds at most kPartialTerms products, on every target.
std::int64_t partial_block_tokens(std::int64_t rows);

// One modality's dscale (`row` = P * D values) from its FP32 partials [blocks][row]: the blocks
// added in block order in FP64 (`sum`, row doubles of scratch), rounded to FP32 once.
void add_partials(const float *partials, std::int64_t blocks, std::int64_t row, double *sum, float *dscale);

}  // namespace magi2norm::detail
