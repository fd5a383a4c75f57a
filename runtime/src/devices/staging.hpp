// How the buffers of a GPU call meet the device: host memory staged through it (host views), or
// device memory wrapped in place. The forward (kernels.cpp) and the backward (backward.cpp)
// attach their buffers here before a GPU variant runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "halide_calls.hpp"

namespace magi2norm::detail {

class Staging {
public:
    // `memory`: where the views' data lie (input/output); host tables always go through host_*.
    Staging(Backend backend, Memory memory, CallContext *context) : backend_(backend), memory_(memory), context_(context) {}
    Staging(const Staging &) = delete;
    Staging &operator=(const Staging &) = delete;
    // Device copies of host memory are freed; wrapped device memory is only detached.
    ~Staging();

    // A view's data, in the call's memory: host memory (an input marked dirty so the variant
    // copies it in) or device memory, wrapped.
    void input(halide_buffer_t &b, const void *data) { attach(b, data, memory_, halide_buffer_flag_host_dirty); }
    void output(halide_buffer_t &b, void *data) { attach(b, data, memory_, 0); }
    // Host memory whatever the views' memory (the runtime's own tables and results).
    void host_input(halide_buffer_t &b, const void *data) { attach(b, data, Memory::host, halide_buffer_flag_host_dirty); }
    void host_output(halide_buffer_t &b, void *data) { attach(b, data, Memory::host, 0); }

    // After the kernel: an output staged from host memory comes back (Halide's status; 0 for
    // a wrapped one, which stays on the device).
    int finish(halide_buffer_t &out);

private:
    static constexpr std::size_t kMaxBuffers = 9;

    void attach(halide_buffer_t &b, const void *data, Memory memory, std::uint64_t host_flags);
    bool wrapped(const halide_buffer_t &b) const;

    Backend backend_;
    Memory memory_;
    CallContext *context_;
    halide_buffer_t *buffers_[kMaxBuffers] = {};
    bool wrapped_[kMaxBuffers] = {};
    std::size_t count_ = 0;
};

// A device allocation's first `bytes` copied to host memory at `host`, and host memory copied
// into one, on `backend` in the call's context (CUDA device pointer or cl_mem `device`).
void copy_to_host(Backend backend, CallContext *context, const void *device, void *host, std::size_t bytes);
void copy_to_device(Backend backend, CallContext *context, const void *host, void *device, std::size_t bytes);

}  // namespace magi2norm::detail
