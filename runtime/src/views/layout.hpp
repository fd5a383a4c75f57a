// From the user's views to the kernel's four axes (d, h, a, t), innermost first:
//   d  the normalized axis (extent D);
//   h  the pattern / head axis, which selects the scale row when P > 1;
//   a  any other middle axis (rank 4);
//   t  the token axis (axis 0 of the input), which selects the modality; with one modality the
//      runtime may regroup rows into it (fold_rows).
// Broadcasting reaches the kernel as stride 0: an input axis of extent 1 against P patterns, and
// the scale's pattern axis when P = 1.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "magi2norm/magi2norm.hpp"
#include "views.hpp"

namespace magi2norm::detail {

struct KernelLayout {
    std::array<std::int64_t, 4> extent{};      // output extents (d, h, a, t)
    std::array<std::int64_t, 4> x_stride{};    // input element strides on those axes
    std::array<std::int64_t, 4> out_stride{};  // output element strides on those axes
    std::array<std::int64_t, 4> inv_stride{};  // the inverse RMS's element strides on (h, a, t)
                                               // (plan_inverse_rms; all 0 without one)
    std::int64_t scale_h_stride = 0;           // D when P > 1, 0 when the one row broadcasts
    bool has_token_axis = false;               // false: rank 1, or rank 2 with P > 1
};

// SPEC.md's output shape for an input shape; throws Error(shape) when it does not broadcast.
Dims output_shape(const NormConfig &config, const Dims &input_shape);

// The kernels index with int32 extents and strides: Error(overflow) naming the view (`what`)
// where an extent or a stride's magnitude passes 2^31 - 1 (the strides of extent-1 axes are 0
// here, check_geometry).
void check_int32_axes(const CheckedView &v, const char *what);

// Maps checked input and output views onto the kernel axes; throws Error(shape) when the output
// shape is not output_shape(x.shape), Error(overflow) when an extent or stride exceeds int32.
KernelLayout plan_layout(const NormConfig &config, const CheckedView &x, const CheckedView &out);

// Adds the per-row inverse RMS view `inv` (FP32, the output's shape without its last axis) to a
// layout of `out`; throws Error(dtype) or Error(shape) naming the mismatch, Error(overflow) past
// int32 strides.
void plan_inverse_rms(KernelLayout &layout, const NormConfig &config, const CheckedView &out, const CheckedView &inv);

// The output dtype of a call: its override, else the norm's out_dtype, else the input's; throws
// Error(dtype) for a value outside the enum.
DType output_dtype(const NormConfig &config, DType input, std::optional<DType> override_dtype);

// With one modality no axis selects a modality, and with P = 1 none selects a scale row either,
// so the rows can be walked in any grouping into tokens. fold_rows folds the middle axis `a` into
// the token axis where one stride steps over both, and then, with P = 1 (the thresholds are the
// runtime knobs of schedules/runtime_knobs.def, as the build sets them:
// magi2norm_build_knobs.hpp):
// - the head axis too when a token's rows pass fold_token_bytes of input (x [1, S, D] would be
//   one token: one task on one thread), or, where its strides do not chain, makes the longer of
//   the head and token axes the tokens;
// - tokens of one row of at most short_row_bytes become tokens of k rows, k the most that fit in
//   `chunk_bytes` (the CPU schedule's cpu_chunk_bytes) and divide the rows evenly, so that their
//   sums come together (schedules/cpu_schedule.cpp); longer rows gain nothing from it.
// The kernel then gets no token ids (with one modality every token's modality is 0).
void fold_rows(KernelLayout &layout, std::int64_t in_bytes, bool patterned, std::int64_t chunk_bytes);

}  // namespace magi2norm::detail
