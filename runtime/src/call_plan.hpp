// A call of the norm, decided in one place. plan_call takes the norm, the views' geometry, the
// grouping and the call's options, checks everything that does not depend on the data pointers,
// and returns the one kernel call: backend, folded layout, scale, grouping arguments, and the
// variants of each form and store kind that the geometry allows. run_call then checks the
// pointers (null, overlap, ids), picks among those variants by the pointers' alignment and the
// streaming policy, and runs it.
//
//   views --check_geometry--> CheckedView --plan_layout--> KernelLayout --fold_rows--> (one modality)
//         --variants_for--> elements / paired_words x ordinary / streaming --run_call--> Halide call
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "HalideRuntime.h"
#include "kernel_abi.h"
#include "kernels.hpp"
#include "layout.hpp"
#include "norm_state.hpp"
#include "overlap.hpp"
#include "views.hpp"

namespace magi2norm::detail {

// The halide_dimension_t of x, out, scale and ids that one form's variants take for a plan's
// layout (kernel_args.hpp).
struct KernelDims {
    std::array<halide_dimension_t, 4> x, out;
    std::array<halide_dimension_t, 3> scale, inverse_rms;
    halide_dimension_t ids;
};

struct CallPlan {
    std::shared_ptr<const NormState> keep;  // a public Plan's hold on the norm; empty inside forward()
    const NormState *norm = nullptr;

    Backend backend = Backend::cpu;
    Memory memory = Memory::host;  // of x, out and the ids
    CheckedView x, out;            // the caller's views (geometry only)
    // The training form's per-row inverse RMS (CallOptions::inverse_rms): its view and memory.
    std::optional<CheckedView> inverse_rms;
    void *inverse_rms_data = nullptr;
    KernelLayout layout;           // the kernel's axes, rows regrouped with one modality
    std::int64_t tokens = 0;       // axis 0 of the input: the count of per-token ids

    // Grouping: starts of modalities 1.. (INT32_MAX past the last), or per-token ids.
    std::array<std::int32_t, abi::kMaxGroups - 1> group_starts{};
    bool checks_ids = false;                  // by ids: run() receives and checks them
    bool takes_ids = false;                   // by ids with M > 1: the kernel reads them
    std::vector<std::int32_t> ids_from_sizes;  // by sizes with M > kMaxGroups (host memory)

    // The scale and one int32 zero (every token's id without ids), in the views' memory.
    const float *scale = nullptr;
    const std::int32_t *zero_id = nullptr;
    // GPU: the caller's context and stream (CUDA: CUcontext, CUstream; OpenCL: cl_context,
    // cl_command_queue), for device memory.
    void *gpu_context = nullptr, *gpu_stream = nullptr;
    bool cl_buffers = false;  // the views are OpenCL buffers (cl_mem), checked against their size

    // The variants this geometry allows, [0] ordinary and [1] streaming stores; null where none
    // serves it. The element form's ordinary variant is always there.
    std::array<const KernelEntry *, 2> elements{}, paired_words{};
    // The one-row form (ordinary stores) where the layout is one dense row; it reads the scale
    // block of the row's modality: `row_modality`'s, or the id's where the kernel takes ids.
    const KernelEntry *one_row = nullptr;
    std::int64_t row_modality = 0;
    std::array<KernelDims, kForms> dims{};   // by Form
    std::int64_t out_bytes = 0;              // CPU: the output's elements' bytes, for the streaming policy

    // GPU calls on host views with a negative stride run on contiguous copies (Halide's
    // host-to-device copies need strides >= 0): `layout` is then that of the copies.
    bool through_copies = false;

    // The call's own settings; unset: the process's when the call starts.
    std::optional<int> num_threads;
    std::optional<ParallelLoop> parallel_loop;
    std::optional<StreamingPolicy> streaming;
};

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

// Throws Error naming the problem; reads no data pointer.
CallPlan plan_call(const NormState &norm, const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
                   const CallOptions &options);

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

// Runs the planned call on data at `x` and `out` (and `ids` when the plan takes ids): checks the
// pointers first, so a refused call writes nothing.
void run_call(const CallPlan &plan, const void *x, void *out, const std::int32_t *ids);
// The same with `kernel` in place of the one choose_kernel picks (null: that one), as the tuner
// runs its candidates: a variant of the planned dtypes, form and store kind for this layout (GPU
// calls through contiguous copies keep their own).
void run_call(const CallPlan &plan, const KernelEntry *kernel, const void *x, void *out, const std::int32_t *ids);

}  // namespace magi2norm::detail
