// The scale of a norm in device memory, uploaded on the first device-memory call in each CUDA
// context and kept for the norm's lifetime, so later calls copy and allocate nothing.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "halide_calls.hpp"

namespace magi2norm {

struct RMSNorm::DeviceScales {
    // The device copy of `scale` followed by one zero (read as the int32 id 0 by calls without
    // per-token ids), for `backend` in the resolved CUDA `context`.
    const float *get(const std::vector<float> &scale, Backend backend, void *context, void *stream);
    ~DeviceScales();

private:
    struct Entry {
        Backend backend;
        void *context;
        std::vector<float> host;
        halide_dimension_t dim;
        halide_buffer_t buffer;
    };
    std::mutex mutex_;
    std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace magi2norm
