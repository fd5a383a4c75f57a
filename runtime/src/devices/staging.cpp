#include "staging.hpp"

#include <string>

#if MAGI2NORM_HAS_CUDA
#include "HalideRuntimeCuda.h"
#endif
#if MAGI2NORM_HAS_OPENCL
#include "HalideRuntimeOpenCL.h"
#endif

namespace magi2norm::detail {

namespace {

void wrap(Backend backend, CallContext *context, halide_buffer_t &b, const void *data);
void detach(Backend backend, CallContext *context, halide_buffer_t *b);

}  // namespace

Staging::~Staging() {
    for (std::size_t i = 0; i < count_; ++i) {
        if (wrapped_[i]) {
            detach(backend_, context_, buffers_[i]);
        } else {
            halide_device_free(context_, buffers_[i]);
        }
    }
}

bool Staging::wrapped(const halide_buffer_t &b) const {
    for (std::size_t i = 0; i < count_; ++i) {
        if (buffers_[i] == &b) return wrapped_[i];
    }
    return false;
}

int Staging::finish(halide_buffer_t &out) {
    if (wrapped(out)) return 0;
    return halide_copy_to_host(context_, &out);
}

void Staging::attach(halide_buffer_t &b, const void *data, Memory memory, std::uint64_t host_flags) {
    if (count_ == kMaxBuffers) throw Error(ErrorCode::device, "a GPU call stages at most 8 buffers");
    buffers_[count_] = &b;
    wrapped_[count_] = memory == Memory::device;
    ++count_;
    if (memory == Memory::device) {
        wrap(backend_, context_, b, data);
        return;
    }
    b.host = static_cast<std::uint8_t *>(const_cast<void *>(data));
    b.flags = host_flags;
}

namespace {

// A byte buffer of `bytes` over device memory `device`, with host memory `host` beside it.
struct ByteBuffer {
    halide_dimension_t dim;
    halide_buffer_t b{};
    ByteBuffer(const void *host, std::size_t bytes) : dim(0, static_cast<std::int32_t>(bytes), 1) {
        b.type = halide_type_t(halide_type_uint, 8);
        b.dimensions = 1;
        b.dim = &dim;
        b.host = static_cast<std::uint8_t *>(const_cast<void *>(host));
    }
};

}  // namespace

void copy_to_host(Backend backend, CallContext *context, const void *device, void *host, std::size_t bytes) {
    if (bytes == 0) return;
    ByteBuffer buffer(host, bytes);
    wrap(backend, context, buffer.b, device);
    buffer.b.flags = halide_buffer_flag_device_dirty;
    const int status = halide_copy_to_host(context, &buffer.b);
    detach(backend, context, &buffer.b);
    if (status != 0) throw Error(ErrorCode::device, "cannot copy device memory to the host: " + take_halide_error());
}

void copy_to_device(Backend backend, CallContext *context, const void *host, void *device, std::size_t bytes) {
    if (bytes == 0) return;
    ByteBuffer buffer(host, bytes);
    wrap(backend, context, buffer.b, device);
    buffer.b.flags = halide_buffer_flag_host_dirty;
    const int status = halide_copy_to_device(context, &buffer.b, device_interface(backend));
    detach(backend, context, &buffer.b);
    if (status != 0) throw Error(ErrorCode::device, "cannot copy host memory to the device: " + take_halide_error());
}

namespace {

void wrap(Backend backend, CallContext *context, halide_buffer_t &b, const void *data) {
#if MAGI2NORM_HAS_CUDA
    if (backend == Backend::cuda) {
        if (halide_cuda_wrap_device_ptr(context, &b, reinterpret_cast<std::uint64_t>(data)) != 0) {
            throw Error(ErrorCode::device, "cannot wrap a CUDA device pointer: " + take_halide_error());
        }
        return;
    }
#endif
#if MAGI2NORM_HAS_OPENCL
    if (backend == Backend::opencl) {
        if (halide_opencl_wrap_cl_mem(context, &b, reinterpret_cast<std::uint64_t>(data)) != 0) {
            throw Error(ErrorCode::device, "cannot wrap an OpenCL buffer: " + take_halide_error());
        }
        return;
    }
#endif
    (void)context;
    (void)b;
    (void)data;
    throw Error(ErrorCode::device, std::string("device-memory views need the cuda or opencl backend, not ") +
                                       backend_name(backend));
}

void detach(Backend backend, CallContext *context, halide_buffer_t *b) {
    (void)backend;
    (void)context;
    if (b->device == 0) return;
#if MAGI2NORM_HAS_CUDA
    if (backend == Backend::cuda) halide_cuda_detach_device_ptr(context, b);
#endif
#if MAGI2NORM_HAS_OPENCL
    if (backend == Backend::opencl) halide_opencl_detach_cl_mem(context, b);
#endif
}

}  // namespace

}  // namespace magi2norm::detail
