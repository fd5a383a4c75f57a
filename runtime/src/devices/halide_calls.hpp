// Shared plumbing for calls into the Halide runtime: the per-call user context, the error
// message capture, and the device interfaces of the GPU backends compiled in.
#pragma once

#include <string>

#include "HalideRuntime.h"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::detail {

// What every variant receives as Halide's user_context: the caller's GPU context and stream
// (CUDA: CUcontext and CUstream, read by the CUDA hooks in backends.cpp; OpenCL: cl_context and
// cl_command_queue, read by opencl_context.cpp), both null when the library's own are wanted;
// and the call's parallel loop (threads.cpp): a host's loop, or the library's pool with at most
// `num_threads` of its threads (resolve_parallel_loop: the call's, else the process's).
struct CallContext {
    void *context = nullptr;
    void *stream = nullptr;
    ParallelLoop loop;
    int num_threads = 0;
};

// Installs the error capture, the library's parallel loop and the CUDA hooks (once per process;
// every call of a variant comes after it).
void install_halide_hooks();
// Routes Halide's parallel loops through the library's (threads.cpp); install_halide_hooks calls it.
void install_parallel_loop();
// The parallel loop and thread count of a call: its own options where set, else the process's.
void resolve_parallel_loop(CallContext &call, const std::optional<ParallelLoop> &loop, const std::optional<int> &threads);
// The message of the last Halide error on this thread, then cleared.
std::string take_halide_error();
// The CUDA context a call will use: `requested`, else the calling thread's current one, else
// null (Halide's own context).
void *resolve_cuda_context(void *requested);
// Compute capability x10 of the device of a CUDA context (null: device 0, which Halide's own
// context uses), asked of the driver once per context; 0 when the driver or the device cannot tell.
int cuda_compute_capability(void *context);
// The device interface of a GPU backend; throws Error(device) when it is not compiled in.
const halide_device_interface_t *device_interface(Backend backend);

}  // namespace magi2norm::detail
