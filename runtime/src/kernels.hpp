// The AOT variants this library carries, as the table the build generates from its family list
// (runtime/CMakeLists.txt), and the running of one on prepared buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::detail {

struct KernelArgs;

// Every variant's _argv entry point: pointers to (user_context, x, scale, token_modality,
// group_start_1..15, eps, out), in that order.
using KernelFn = int (*)(void **args);

// The two forms of the algorithm (generators/magi2_norm_generator.cpp): over elements, or over
// 32-bit words of two BF16 elements (define_paired_words).
enum class Form : std::uint8_t { elements, paired_words };

struct KernelEntry {
    Backend backend;
    int compute_capability;   // CUDA: the lowest device capability (x10) the PTX runs on; else 0
    Form form;
    int streaming_alignment;  // streaming-store variants: the output alignment they need; else 0
    DType in, out;
    KernelFn fn;
    const char *name;  // the pipeline's function name, which last_variant() reports
};

// The variant of (backend, dtype pair, form, stores); for CUDA the one built for the highest
// capability the device has (the lowest built when the capability is unknown: its failure then
// names the cause). Null when the library has none.
const KernelEntry *find_kernel(Backend backend, DType in, DType out, Form form, bool streaming, int device_capability);

// The output alignment the CPU streaming-store variants need; 0 when the library has none.
int cpu_streaming_alignment();

// The backends that have variants in this library.
std::vector<Backend> compiled_kernel_backends();

// Runs `kernel` over `args` (Halide's hooks installed: install_halide_hooks) with the call's
// memory attached: host memory as is (CPU), host memory
// staged through the device and back (GPU backend), or device memory wrapped in place. Throws
// Error(device) with Halide's message when it fails; then sets last_variant().
void run_kernel(const KernelEntry &kernel, KernelArgs &args, Memory memory, const void *x, const void *scale,
                const void *ids, void *out);

}  // namespace magi2norm::detail
