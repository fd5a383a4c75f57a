// The backward's device path: one kernel call for every modality on a GPU, in place on device
// memory or staged from host views, with the tables that order the tokens by modality.
#pragma once

#include <cstdint>
#include <vector>

#include "../devices/halide_calls.hpp"
#include "../variants/kernels.hpp"
#include "backward_plan.hpp"

namespace magi2norm::detail {

// The GPU form's tables (generators/magi2_norm_backward_generator.cpp): each token's modality,
// the tokens in modality order (stable, as the dispatcher's), each block's first position in
// that order (and, last, the token count), and each modality's first block (M + 1 entries).
struct GpuTables {
    std::vector<std::int32_t> modality, order, block_first;
    std::vector<std::int64_t> modality_blocks;
};

GpuTables gpu_tables(const BackwardPlan &g, std::vector<std::int64_t> sizes, const std::int32_t *ids);

// The GPU variant over every token at once (views in the plan's memory, the tables and the
// partials staged from and to the host); dscale as run_kernels gives it.
std::vector<float> run_gpu(const BackwardPlan &g, const KernelEntry &kernel, CallContext &call, const void *x, const void *dy,
                           void *dx, const GpuTables &t);

}  // namespace magi2norm::detail
