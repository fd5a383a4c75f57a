// The scale of a norm in device memory, uploaded on the first device-memory call in each GPU
// context (CUDA: on that call's stream, waited for once) and kept for the norm's lifetime, so
// later calls copy, allocate and wait for nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "halide_calls.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::detail {

class DeviceScales {
public:
    // Device handles (a CUDA device pointer or a cl_mem) of the scale and of one int32 zero,
    // which calls without per-token ids read as every token's id.
    struct Handles {
        const float *scale;
        const std::int32_t *zero_id;
    };
    // The handles of `scale` for `backend` in the GPU `context` (CUDA: resolved CUcontext;
    // OpenCL: cl_context), uploaded on `stream` by the first call.
    Handles get(const std::vector<float> &scale, Backend backend, void *context, void *stream);
    ~DeviceScales();

private:
    struct Entry {
        Backend backend;
        void *context;
        Handles handles;
        // CUDA: the scale and, after it, the zero, in one Halide device buffer.
        std::vector<float> host;
        halide_dimension_t dim;
        halide_buffer_t buffer;
    };
    static void upload_cuda(Entry &e, const std::vector<float> &scale, void *stream);
    std::mutex mutex_;
    std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace magi2norm::detail
