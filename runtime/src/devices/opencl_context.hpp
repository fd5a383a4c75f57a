// OpenCL device memory: the caller's context and command queue, and the few OpenCL calls the
// runtime makes itself. Halide's OpenCL runtime asks for its context and queue through
// halide_acquire_cl_context / halide_release_cl_context, weak symbols meant to be overridden;
// opencl_context.cpp overrides them: a call that carries a command queue (CallContext::stream)
// runs on it, any other OpenCL call on one context and queue of the library's own, chosen as
// Halide's default chooses (HL_OCL_PLATFORM_NAME, HL_OCL_DEVICE_TYPE, HL_GPU_DEVICE).
#pragma once

#include <cstddef>
#include <cstdint>

namespace magi2norm::detail {

// Where the bytes of a cl_mem lie: the buffer they belong to (the parent of a sub-buffer, else
// the cl_mem itself), their offset in it, and their count.
struct OpenclExtent {
    const void *root;
    std::uint64_t offset, size;
};
// The extent of `mem`; throws Error(device) when it is not a valid cl_mem.
OpenclExtent opencl_extent(const void *mem);

// The cl_context of a cl_command_queue; throws Error(device) when OpenCL cannot tell.
void *opencl_queue_context(void *queue);
// A read-only cl_mem of `bytes` in `context`, holding a copy of `host`; throws Error(device).
void *opencl_upload(void *context, const void *host, std::size_t bytes);
// Releases a cl_mem from opencl_upload.
void opencl_release(void *mem);

}  // namespace magi2norm::detail
