// The library's process-level queries as C functions, which the Python package reads through
// ctypes (magi2norm/_library.py): no Python extension, so the package is one build for every
// Python and torch version.
#include <cstdint>

#include <magi2norm/magi2norm.hpp>

#include "norm_cache.hpp"
#include "output_pool.hpp"
#include "torch_runtime.hpp"

extern "C" {

// The variant the calling thread's last CPU or GPU call ran.
__attribute__((visibility("default"))) const char *magi2norm_torch_last_variant() { return magi2norm::last_variant(); }

// Whether CUDA calls can run: a CUDA torch and the library's CUDA backend with a driver.
__attribute__((visibility("default"))) int magi2norm_torch_cuda_available() {
    return magi2norm_torch::torch_has_cuda() && magi2norm::backend_available(magi2norm::Backend::cuda) ? 1 : 0;
}

// Frees the CPU output blocks the pool keeps for reuse; returns their bytes. Bytes kept now.
__attribute__((visibility("default"))) std::uint64_t magi2norm_torch_release_pool() { return magi2norm_torch::release_pool(); }
__attribute__((visibility("default"))) std::uint64_t magi2norm_torch_pooled_bytes() { return magi2norm_torch::pooled_bytes(); }

// Drops the norms kept per weight; returns how many.
__attribute__((visibility("default"))) std::int64_t magi2norm_torch_clear_norms() { return magi2norm_torch::clear_norms(); }
}
