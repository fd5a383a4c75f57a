#include "torch_runtime.hpp"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <stdexcept>
#include <string>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

namespace magi2norm_torch {

namespace {

// One library loop as one at::parallel_for: each of torch's threads runs a contiguous range of
// the tasks (the library's tasks are even, so ranges balance as claimed tasks would).
void run_on_torch_threads(void *, int count, void (*task)(void *, int), void *task_context) {
    torch::stable::parallel_for(0, count, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) task(task_context, static_cast<int>(i));
    });
}

using CurrentCudaStream = std::int32_t (*)(std::int32_t, void **);

CurrentCudaStream cuda_stream_function() {
    static const CurrentCudaStream function =
        reinterpret_cast<CurrentCudaStream>(dlsym(RTLD_DEFAULT, "aoti_torch_get_current_cuda_stream"));
    return function;
}

}  // namespace

magi2norm::ParallelLoop torch_parallel_loop() { return {run_on_torch_threads, nullptr}; }

int torch_num_threads() { return static_cast<int>(torch::stable::get_num_threads()); }

bool torch_has_cuda() { return cuda_stream_function() != nullptr; }

void *current_cuda_stream(std::int32_t device_index) {
    const CurrentCudaStream function = cuda_stream_function();
    if (function == nullptr) throw std::runtime_error("magi2norm: this torch has no CUDA (aoti_torch_get_current_cuda_stream is not loaded)");
    void *stream = nullptr;
    if (function(device_index, &stream) != AOTI_TORCH_SUCCESS) {
        throw std::runtime_error("magi2norm: torch did not give the current CUDA stream of device " + std::to_string(device_index));
    }
    return stream;
}

std::optional<std::int64_t> tensor_version(const torch::stable::Tensor &t) {
    std::array<StableIValue, 1> stack{torch::stable::detail::from(t)};
    TORCH_ERROR_CODE_CHECK(torch_call_dispatcher("aten::is_inference", "", stack.data(), TORCH_ABI_VERSION));
    if (torch::stable::detail::to<bool>(stack[0])) return std::nullopt;
    stack[0] = torch::stable::detail::from(t);
    TORCH_ERROR_CODE_CHECK(torch_call_dispatcher("aten::_version", "", stack.data(), TORCH_ABI_VERSION));
    return torch::stable::detail::to<std::int64_t>(stack[0]);
}

}  // namespace magi2norm_torch
