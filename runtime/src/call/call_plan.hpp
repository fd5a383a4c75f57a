// A forward call of the norm. plan_call takes the norm, the views' geometry, the grouping and the
// call's options, checks everything that does not depend on the data pointers (call_checks.hpp),
// and returns the one kernel call: backend, folded layout, scale, grouping arguments, and the
// variants of each form and store kind that the geometry allows (variant_choice.hpp). run_call
// then checks the pointers (null, overlap, ids), picks among those variants by the pointers'
// alignment and the streaming policy, and runs it.
//
//   views --check_geometry--> CheckedView --plan_layout--> KernelLayout --fold_rows--> (one modality)
//         --plan_variants--> elements / paired_words x ordinary / streaming --run_call--> Halide call
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "../variants/kernel_args.hpp"
#include "../variants/kernels.hpp"
#include "../views/layout.hpp"
#include "../views/overlap.hpp"
#include "../views/views.hpp"
#include "HalideRuntime.h"
#include "kernel_abi.h"
#include "norm_state.hpp"

namespace magi2norm::detail {

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
    std::array<KernelDims, kForwardForms> dims{};  // by Form
    std::int64_t out_bytes = 0;              // CPU: the output's elements' bytes, for the streaming policy

    // GPU calls on host views with a negative stride run on contiguous copies (Halide's
    // host-to-device copies need strides >= 0): `layout` is then that of the copies.
    bool through_copies = false;

    // The call's own settings; unset: the process's when the call starts.
    std::optional<int> num_threads;
    std::optional<ParallelLoop> parallel_loop;
    std::optional<StreamingPolicy> streaming;
};

// Throws Error naming the problem; reads no data pointer.
CallPlan plan_call(const NormState &norm, const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
                   const CallOptions &options);

// Runs the planned call on data at `x` and `out` (and `ids` when the plan takes ids): checks the
// pointers first, so a refused call writes nothing.
void run_call(const CallPlan &plan, const void *x, void *out, const std::int32_t *ids);
// The same with `kernel` in place of the one choose_kernel picks (null: that one), as the tuner
// runs its candidates: a variant of the planned dtypes, form and store kind for this layout (GPU
// calls through contiguous copies keep their own).
void run_call(const CallPlan &plan, const KernelEntry *kernel, const void *x, void *out, const std::int32_t *ids);

}  // namespace magi2norm::detail
