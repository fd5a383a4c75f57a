#include "staging.hpp"

#include <string>

#if MAGI2NORM_HAS_CUDA
#include "HalideRuntimeCuda.h"
#endif
#if MAGI2NORM_HAS_OPENCL
#include "HalideRuntimeOpenCL.h"
#endif

namespace magi2norm::detail {

Staging::~Staging() {
    for (std::size_t i = 0; i < count_; ++i) {
        if (wrapped_) {
            detach(buffers_[i]);
        } else {
            halide_device_free(context_, buffers_[i]);
        }
    }
}

int Staging::finish(halide_buffer_t &out) {
    if (wrapped_) return 0;
    return halide_copy_to_host(context_, &out);
}

void Staging::attach(halide_buffer_t &b, const void *data, std::uint64_t host_flags) {
    if (count_ == kMaxBuffers) throw Error(ErrorCode::device, "a GPU call stages at most 6 buffers");
    buffers_[count_++] = &b;
    if (memory_ == Memory::device) {
        wrapped_ = true;
        wrap(b, data);
        return;
    }
    b.host = static_cast<std::uint8_t *>(const_cast<void *>(data));
    b.flags = host_flags;
}

void Staging::wrap(halide_buffer_t &b, const void *data) {
#if MAGI2NORM_HAS_CUDA
    if (backend_ == Backend::cuda) {
        if (halide_cuda_wrap_device_ptr(context_, &b, reinterpret_cast<std::uint64_t>(data)) != 0) {
            throw Error(ErrorCode::device, "cannot wrap a CUDA device pointer: " + take_halide_error());
        }
        return;
    }
#endif
#if MAGI2NORM_HAS_OPENCL
    if (backend_ == Backend::opencl) {
        if (halide_opencl_wrap_cl_mem(context_, &b, reinterpret_cast<std::uint64_t>(data)) != 0) {
            throw Error(ErrorCode::device, "cannot wrap an OpenCL buffer: " + take_halide_error());
        }
        return;
    }
#endif
    (void)b;
    (void)data;
    throw Error(ErrorCode::device, std::string("device-memory views need the cuda or opencl backend, not ") +
                                       backend_name(backend_));
}

void Staging::detach(halide_buffer_t *b) {
    if (b->device == 0) return;
#if MAGI2NORM_HAS_CUDA
    if (backend_ == Backend::cuda) halide_cuda_detach_device_ptr(context_, b);
#endif
#if MAGI2NORM_HAS_OPENCL
    if (backend_ == Backend::opencl) halide_opencl_detach_cl_mem(context_, b);
#endif
}

}  // namespace magi2norm::detail
