// Calling the AOT-compiled variants: picks the variant for a dtype pair and hands it the
// kernel layout as halide_buffer_t descriptors (no copies).
#pragma once

#include <array>
#include <cstdint>

#include "layout.hpp"

namespace magi2norm::detail {

// Grouping by sizes covers up to this many modalities (generators/magi2_norm_generator.cpp).
constexpr int kMaxGroups = 16;

struct KernelCall {
    KernelLayout layout;
    const void *x = nullptr;
    DType in_dtype = DType::f32;
    void *out = nullptr;
    DType out_dtype = DType::f32;
    const float *scale = nullptr;   // [M][P][D]
    std::int64_t dim = 0, num_patterns = 1, num_modality = 1;
    const std::int32_t *token_ids = nullptr;  // [T] or null (then all tokens read id 0)
    // cu[1 .. kMaxGroups - 1]: the first token of modalities 1.., INT32_MAX past the last.
    std::array<std::int32_t, kMaxGroups - 1> group_starts{};
    float eps = 1e-6f;
};

// Runs the CPU variant for (in_dtype, out_dtype). The call must have been validated.
void run_cpu_kernel(const KernelCall &call);

}  // namespace magi2norm::detail
