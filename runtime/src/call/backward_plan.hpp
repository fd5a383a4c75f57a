// The backward call's plan (RMSNorm::backward): the forward's checks of the views and the grouping
// (call_checks.hpp) plus dy's, dx's and dweight's, and the layout the kernels take. Everything is
// checked before anything is written (its pointers by check_backward_pointers, call_checks.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "../views/views.hpp"
#include "call_plan.hpp"
#include "magi2norm/magi2norm.hpp"
#include "norm_state.hpp"

namespace magi2norm::detail {

// One backward call's plan: the forward's plan of x and dy (dy in the output's place), and dx's.
struct BackwardPlan {
    CallPlan p;
    CheckedView dx, dweight;
    std::array<std::int64_t, 4> dx_stride{};  // on the kernel axes; the head axis is dx's rows
    std::int64_t heads_per_dx_row = 1;        // K: dy rows per dx row (singleton-head broadcasting)
    std::int64_t heads_per_pattern = 1;       // dy rows per scale row: H with P = 1, else 1
    std::int64_t patterns = 1;                // scale rows of a modality
    std::int64_t block_tokens = 1;
    // The forward's inverse RMS of each dy row (BackwardOptions::inverse_rms): its view (strides
    // in p.layout.inv_stride) and data; none: the kernels sum the rows' squares.
    std::optional<CheckedView> inverse_rms;
    const void *inverse_rms_data = nullptr;
};

// Throws Error naming the problem (shape, dtype, stride, weight size, device, overlap).
BackwardPlan plan_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                           const TensorView &dx, const TensorView &dweight, const BackwardOptions &options);

// Each modality's token count, in order: by sizes as given; all tokens in modality 0 otherwise
// (one modality, whose ids are all 0).
std::vector<std::int64_t> segment_sizes(const BackwardPlan &g, const Grouping &grouping);

}  // namespace magi2norm::detail
