// Where a call chooses its variant, forward and backward, in one place: which forms and store
// kinds a forward plan may take (plan_variants), which of them a run takes by its pointers
// (choose_kernel), and the backward's variant and its store kind (find_backward,
// choose_cpu_backward, backward_variants, chosen_variant). Each asks the one variant table (variants/kernels.hpp, find_kernel).
#pragma once

#include <cstdint>

#include "../variants/kernels.hpp"
#include "../views/layout.hpp"
#include "call_plan.hpp"

namespace magi2norm::detail {

struct BackwardPlan;

// The variants of each form and store kind that the plan's backend, memory, dtypes and layout
// allow (sets `elements` and `paired_words`; Error(device) when the library has no element-form
// variant for them). Only CPU calls on host memory take the paired-word form and streaming stores.
void plan_variants(CallPlan &plan);

// Whether a policy sends a plan's output to streaming stores (by its size and shape), or an
// output of `out_bytes` bytes of `out_dtype` in rows of `row_elements`.
bool policy_admits(const StreamingPolicy &policy, const CallPlan &plan);
bool policy_admits(const StreamingPolicy &policy, std::int64_t out_bytes, DType out_dtype, std::int64_t row_elements);

// Whether the streaming-store variants can store a layout (its out_stride) of `elem`-byte
// elements aligned to `alignment` bytes, given an aligned first element; whether `p` is aligned.
bool streaming_layout(const KernelLayout &l, std::int64_t elem, std::int64_t alignment);
bool aligned(const void *p, std::uintptr_t alignment);

// The variant a planned call runs with its data at `x` and `out`: streaming stores where the
// policy admits the output and `out` is aligned for them, the paired-word form where both are
// on 4-byte boundaries (whole words).
const KernelEntry &choose_kernel(const CallPlan &plan, const void *x, const void *out);

// The backward variant for the dtypes and a call of `size` (a tuning record's class variant where
// one serves it), of one dy row a dx row unless `several_rows` (singleton-head broadcasting);
// Error(dtype) for a dy dtype no forward makes, Error(device) where the library has no backward
// for the backend.
const KernelEntry &find_backward(Backend backend, int device_capability, DType x, DType dy, DType dx, bool several_rows,
                                 CallSize size);

// The CPU backward variant for a call whose dx (`dx_count` elements of `dx_dtype`, laid out as
// `dx_layout`) is at `dx`: the streaming-store one where the build has it and the call suits it
// (one dy row a dx row; rows a multiple of abi::kStreamingLanes; dx as large as the process's
// StreamingPolicy sends to streaming stores, i.e. from memory; every dx vector aligned for them,
// generators/magi2_norm_backward_generator.cpp, require_streaming_layout), else the ordinary one.
// The two write the same bits.
const KernelEntry &choose_cpu_backward(const KernelEntry &ordinary, const KernelEntry *streaming, const KernelLayout &dx_layout,
                                       DType dx_dtype, std::int64_t dx_count, std::int64_t heads_per_dx_row, const void *dx);

// The variants a call takes (a tuning record's class variants where one serves its size: D and
// the bytes of x, dy and dx): `kernel` for the dtypes and the dx rows' kind, and on CPUs the
// streaming-store one choose_cpu_backward may take instead (null where the build has none).
struct BackwardVariants {
    const KernelEntry *kernel = nullptr;
    const KernelEntry *streaming = nullptr;
};
BackwardVariants backward_variants(const BackwardPlan &g, int capability);

// The variant a call of `g` with its dx at `dx` runs: a GPU's kernel, or on CPUs
// choose_cpu_backward's pick between the ordinary and the streaming-store one.
const KernelEntry &chosen_variant(const BackwardPlan &g, const BackwardVariants &v, const void *dx);

}  // namespace magi2norm::detail
