// The mHC logits' call (RMSNorm::mhc_logits): its checks, which throw Error naming the problem
// before anything is written, and the one kernel call; and the checks its backward shares.
#pragma once

#include <cstdint>
#include <vector>

#include "../devices/halide_calls.hpp"
#include "../variants/kernel_args.hpp"
#include "../views/views.hpp"
#include "call_plan.hpp"
#include "magi2norm/magi2norm.hpp"
#include "norm_state.hpp"

namespace magi2norm::detail {

// x as the kernels' (d, t): its row stride along d, and its token stride; a [T, S, C] view
// whose streams are not one stride apart along d is copied to contiguous rows (`copied`) once
// every check has passed. Throws Error(shape) for another rank or rows of another length than
// D, Error(overflow) for an extent or stride past int32, naming the view `what`.
struct Rows {
    std::int64_t tokens = 0, d_stride = 1, t_stride = 0;
    bool copied = false;
};
Rows rows_of(const CheckedView &x, const NormConfig &config, const char *what = "x");

// A checked FP32 view of shape `expected` (named `what`, laid out as `layout` in errors).
CheckedView checked_f32(const void *data, DType dtype, const std::vector<std::int64_t> &shape, const std::vector<std::int64_t> &strides,
                        const std::vector<std::int64_t> &expected, const char *what, const char *layout);

// A kernel dimension; Error(overflow) past int32.
void set_dim(halide_dimension_t &d, std::int64_t extent, std::int64_t stride, const char *what);

// What both mHC kernels take first, in their order: the call's context, x (d, t), the scale
// (d, p, m), the ids (t) and the group starts of `plan` (which outlives the call); x's rows made
// contiguous where `rows` says so. Each kernel's own buffers follow in `args`, then run().
struct MhcKernelCall {
    static constexpr halide_type_t kF32{halide_type_float, 32};
    HalideBuffer<2> x;
    HalideBuffer<3> scale{kF32};
    HalideBuffer<1> ids{halide_type_t(halide_type_int, 32)};
    std::vector<unsigned char> x_copy;
    CallContext context;
    void *user_context = &context;
    std::vector<void *> args;

    MhcKernelCall(CallPlan &plan, const Rows &rows, const void *x_data, const std::int32_t *token_ids,
                  const std::optional<ParallelLoop> &loop, const std::optional<int> &threads);
    // Runs `kernel` on `args`; Error(device) with Halide's message when it fails.
    void run(const KernelEntry &kernel);
};

void run_mhc_logits(const NormState &norm, const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi,
                    const TensorView &logits, const MhcLogitsOptions &options);

// RMSNorm::mhc_logits_backward: dy = dlogits @ phi^T and dphi from its kernel, then dx and dweight
// from the norm's backward (run_backward).
void run_mhc_logits_backward(const NormState &norm, const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi,
                             const ConstTensorView &dlogits, const TensorView &dx, const TensorView &dweight, const TensorView &dphi,
                             const BackwardOptions &options);

}  // namespace magi2norm::detail
