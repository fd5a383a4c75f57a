// What the forward's and the backward's plans both check, apart from either: where the views are
// and what runs them, the regions their data covers, the grouping and the modality ids, and the
// training form's inverse RMS view. Each throws Error naming the problem before anything is written.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "../views/overlap.hpp"
#include "../views/views.hpp"
#include "call_plan.hpp"

namespace magi2norm::detail {

struct BackwardPlan;

// The grouping's kernel arguments (group starts, ids made from sizes, or ids at run time),
// checked against the plan's layout and token count; throws Error(grouping) naming the problem.
void plan_grouping(CallPlan &plan, const NormConfig &config, const Grouping &grouping);

// Per-token ids of a plan grouped by ids: not null, apart from every region the call writes
// (named in errors by `what`), and in [0, num_modality) where the host can read them (once,
// however many regions).
struct WrittenRegion {
    const Region *region;
    const char *what;
};
void check_ids(const CallPlan &plan, const std::int32_t *ids, std::initializer_list<WrittenRegion> written);

// Modality ids in [0, num_modality): else Error(modality_id) naming the first token outside.
void check_id_values(const std::int32_t *ids, std::int64_t tokens, std::int64_t num_modality);

// Where the views are and what runs them (the plan's backend, memory, cl_buffers, GPU context
// and stream): the memory agrees across x, out and the ids and with the backend, and views of
// OpenCL buffers (a cl_mem is a handle: a view starts at its buffer's first byte) come with the
// host's queue and strides >= 0. Throws Error(device) or Error(stride).
void plan_backend(CallPlan &plan, const ConstTensorView &x, const Grouping &grouping, const TensorView &out, const Stream &stream);

// The elements of checked view `v` at `data`, named `what` in errors: host (or CUDA device)
// addresses, or the part of its OpenCL buffer it covers, which must hold it.
Region view_region(const CallPlan &plan, const CheckedView &v, const void *data, const char *what);

// The inverse RMS view of a call (CallOptions / BackwardOptions::inverse_rms), checked: in the
// plan's memory, FP32 over the rows of the plan's output (or dy) view, its strides put into the
// plan's layout (plan_inverse_rms). Throws Error naming the problem; reads no data pointer.
CheckedView plan_inverse_rms_view(CallPlan &plan, const NormConfig &config, const ConstTensorView &inverse_rms);

// Pointers: not null, and no memory the call writes shared with any other view or the ids,
// but for dx over dy in place.
void check_backward_pointers(const BackwardPlan &g, const void *x, const void *dy, const void *dx, const void *dweight,
                             const std::int32_t *ids);

}  // namespace magi2norm::detail
