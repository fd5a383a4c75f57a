// Streaming (non-temporal) stores for large CPU outputs, an output stage of the runtime's own.
//
// Halide 21 has no directive for non-temporal stores, and ordinary stores of a large output
// first read every line they write (read-for-ownership): for a bf16 -> bf16 norm that is a
// third of the memory traffic. So for large outputs the runtime splits the tokens into slices,
// runs the same variant on each slice into a small dense scratch that stays in this core's
// cache, and copies the scratch to the output with streaming stores. The variant, and so every
// FP32 value and every rounding, is the same as for the direct call.
#pragma once

#include <cstdint>

#include "kernel_args.hpp"

namespace magi2norm::detail {

// Whether `call` takes the streaming path: CPU backend, host memory, rows dense in the output,
// at least two tokens, and an output that streaming_policy() admits.
bool streams_output(const KernelCall &call);

// Runs `fn` slice by slice on Halide's thread pool; returns the first nonzero Halide status.
int run_streamed(KernelFn fn, const KernelCall &call);

}  // namespace magi2norm::detail
