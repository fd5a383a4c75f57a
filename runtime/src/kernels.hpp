// Calling the AOT-compiled variants: picks the variant for (backend, dtype pair) and hands it the
// kernel layout as halide_buffer_t descriptors over the caller's memory (no copies of the data,
// except host memory on a GPU backend, which goes to the device and back).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

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
    // [M][P][D], host or device memory (as `memory`); device memory is a CUDA device pointer or
    // a cl_mem, as are x, out, token_ids and zero_id.
    const float *scale = nullptr;
    std::int64_t dim = 0, num_patterns = 1, num_modality = 1;
    const std::int32_t *token_ids = nullptr;  // [T], or null: every token reads id 0 from `zero_id`
    const std::int32_t *zero_id = nullptr;    // one int32 zero in the same memory as the views
    // cu[1 .. kMaxGroups - 1]: the first token of modalities 1.., INT32_MAX past the last.
    std::array<std::int32_t, kMaxGroups - 1> group_starts{};
    float eps = 1e-6f;
    Backend backend = Backend::cpu;
    Memory memory = Memory::host;  // of x, out, scale, token ids
    // The caller's GPU context and stream (CUDA: CUcontext, CUstream; OpenCL: cl_context,
    // cl_command_queue), for device-memory calls.
    void *gpu_context = nullptr, *gpu_stream = nullptr;
};

// Runs the variant for (backend, in_dtype, out_dtype). The call must have been validated.
void run_kernel(const KernelCall &call);

// Whether `call` takes a streaming-store variant (non-temporal stores: each output line is
// written without being read first): a CPU call on host memory whose output the streaming
// policy admits and which those variants can store aligned: its first element aligned to their
// alignment (32 bytes by default, MAGI2NORM_STREAM_ALIGNMENT), rows dense (unit inner stride)
// and a multiple of it long, and every other output stride a multiple of it. False when the
// library has no such variants.
bool streams_output(const KernelCall &call);

// The backends that have variants in this library.
std::vector<Backend> compiled_kernel_backends();

}  // namespace magi2norm::detail
