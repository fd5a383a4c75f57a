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

// Elements per vector of the paired-word variants: 8 uint32 words (schedules/norm_stages.h,
// kWordsPerVector). Their rows are a whole number of these, and the paired scale table is
// permuted within each block of this many positions.
constexpr int kPairedVectorElements = 16;

struct KernelCall {
    KernelLayout layout;
    const void *x = nullptr;
    DType in_dtype = DType::f32;
    void *out = nullptr;
    DType out_dtype = DType::f32;
    // [M][P][D], host or device memory (as `memory`); device memory is a CUDA device pointer or
    // a cl_mem, as are x, out, token_ids and zero_id.
    const float *scale = nullptr;
    // `scale` permuted for the paired-word variants (paired_word_scale), host memory; null when
    // the norm has none (D not a multiple of 16).
    const float *paired_scale = nullptr;
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
// alignment (32 bytes by default, MAGI2NORM_STREAMING_ALIGNMENT), rows dense (unit inner stride)
// and a multiple of it long, and every other output stride a multiple of it. False when the
// library has no such variants.
bool takes_streaming_stores(const KernelCall &call);

// Whether `call` takes a paired-word variant (BF16 rows read and written as uint32 words of two
// elements, generators/magi2_norm_generator.cpp, define_paired_words): a CPU call on host
// memory, BF16 -> BF16, with a paired scale, rows of a multiple of 16 elements with unit inner
// strides on both sides, x and out on 4-byte boundaries, and every other stride of an axis
// longer than 1 even (a whole number of words).
bool takes_paired_words(const KernelCall &call);

// The [M][P][D] scale table laid out for the paired-word variants: within each 16 positions of
// a row, the scales of the even positions first, then the odd ones (element 16 jo + 8 odd + ji
// is the scale of position 16 jo + 2 ji + odd). Empty when D is not a multiple of 16.
std::vector<float> paired_word_scale(const std::vector<float> &scale, std::int64_t dim);

// The backends that have variants in this library.
std::vector<Backend> compiled_kernel_backends();

}  // namespace magi2norm::detail
