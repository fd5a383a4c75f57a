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
    Staging(Backend backend, Memory memory, CallContext *context) : backend_(backend), memory_(memory), context_(context) {}
    Staging(const Staging &) = delete;
    Staging &operator=(const Staging &) = delete;
    // Device copies of host views are freed; wrapped device memory is only detached.
    ~Staging();

    // An input: host memory (marked dirty so the variant copies it in) or device memory.
    void input(halide_buffer_t &b, const void *data) { attach(b, data, halide_buffer_flag_host_dirty); }
    void output(halide_buffer_t &b, void *data) { attach(b, data, 0); }

    // After the kernel: an output staged from host memory comes back (Halide's status).
    int finish(halide_buffer_t &out);

private:
    static constexpr std::size_t kMaxBuffers = 6;

    void attach(halide_buffer_t &b, const void *data, std::uint64_t host_flags);
    void wrap(halide_buffer_t &b, const void *data);
    void detach(halide_buffer_t *b);

    Backend backend_;
    Memory memory_;
    CallContext *context_;
    halide_buffer_t *buffers_[kMaxBuffers] = {};
    std::size_t count_ = 0;
    bool wrapped_ = false;
};

}  // namespace magi2norm::detail
