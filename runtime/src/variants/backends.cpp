// Backends: what is compiled in, what can run here, the process default, and the hooks that
// make Halide's CUDA runtime use the caller's context and stream.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "../devices/halide_calls.hpp"
#include "kernels.hpp"
#if MAGI2NORM_HAS_CUDA
#include "HalideRuntimeCuda.h"
#endif
#if MAGI2NORM_HAS_OPENCL
#include "HalideRuntimeOpenCL.h"
#endif

namespace magi2norm {

namespace detail {

namespace {

thread_local std::string last_error;
void capture_error(void *, const char *message) { last_error = message; }

#if MAGI2NORM_HAS_CUDA
halide_cuda_acquire_context_t default_acquire_context = nullptr;
halide_cuda_get_stream_t default_get_stream = nullptr;

// A CUDA driver function, looked up without linking the driver; null when the process has not
// loaded it (and `load` is false) or it does not exist.
template <typename Fn>
Fn driver_function(const char *name, bool load) {
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | (load ? 0 : RTLD_NOLOAD));
    return driver ? reinterpret_cast<Fn>(dlsym(driver, name)) : nullptr;
}

// The calling thread's current CUDA context, if the process has loaded the driver and made one
// current (as a PyTorch host has). A failed look-up is not kept: a host may load the driver after
// the library first looked (a backend probe at import time, before PyTorch initialises CUDA).
void *current_cuda_context() {
    using GetCurrent = int (*)(void **);
    static std::atomic<GetCurrent> found{nullptr};
    GetCurrent get_current = found.load(std::memory_order_acquire);
    if (get_current == nullptr) {
        get_current = driver_function<GetCurrent>("cuCtxGetCurrent", false);
        found.store(get_current, std::memory_order_release);
    }
    void *context = nullptr;
    if (get_current == nullptr || get_current(&context) != 0) return nullptr;
    return context;
}

int acquire_context(void *user_context, void **context, bool create) {
    const auto *call = static_cast<const CallContext *>(user_context);
    void *chosen = resolve_cuda_context(call ? call->context : nullptr);
    if (chosen) {
        *context = chosen;
        return 0;
    }
    return default_acquire_context(user_context, context, create);
}

int get_stream(void *user_context, void *context, void **stream) {
    const auto *call = static_cast<const CallContext *>(user_context);
    if (call && call->stream) {
        *stream = call->stream;
        return 0;
    }
    return default_get_stream(user_context, context, stream);
}
#endif

}  // namespace

#if MAGI2NORM_HAS_CUDA
namespace {

// The driver's answer for the device of `context` (a context push and pop, a few driver calls).
int query_compute_capability(void *context) {
    using InitFn = int (*)(unsigned);
    using PushFn = int (*)(void *);
    using PopFn = int (*)(void **);
    using DeviceFn = int (*)(int *);
    using DeviceGetFn = int (*)(int *, int);
    using AttributeFn = int (*)(int *, int, int);
    const auto init = driver_function<InitFn>("cuInit", true);
    const auto push = driver_function<PushFn>("cuCtxPushCurrent_v2", true);
    const auto pop = driver_function<PopFn>("cuCtxPopCurrent_v2", true);
    const auto ctx_device = driver_function<DeviceFn>("cuCtxGetDevice", true);
    const auto device_get = driver_function<DeviceGetFn>("cuDeviceGet", true);
    const auto attribute = driver_function<AttributeFn>("cuDeviceGetAttribute", true);
    if (!init || !push || !pop || !ctx_device || !device_get || !attribute || init(0) != 0) return 0;
    int device = 0;
    if (context) {
        void *popped = nullptr;
        if (push(context) != 0) return 0;
        const int status = ctx_device(&device);
        pop(&popped);
        if (status != 0) return 0;
    } else if (device_get(&device, 0) != 0) {
        return 0;
    }
    constexpr int kMajor = 75, kMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
    int major = 0, minor = 0;
    if (attribute(&major, kMajor, device) != 0 || attribute(&minor, kMinor, device) != 0) return 0;
    return major * 10 + minor;
}

}  // namespace
#endif

int cuda_compute_capability(void *context) {
#if MAGI2NORM_HAS_CUDA
    // Per context, as asked; a context's device never changes. Unknown answers (0) are asked
    // again: the driver may not be loaded yet.
    static std::mutex mutex;
    static std::vector<std::pair<void *, int>> known;
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto &[c, capability] : known) {
        if (c == context) return capability;
    }
    const int capability = query_compute_capability(context);
    if (capability != 0) known.emplace_back(context, capability);
    return capability;
#else
    (void)context;
    return 0;
#endif
}

void install_halide_hooks() {
    static std::once_flag once;
    std::call_once(once, [] {
        halide_set_error_handler(capture_error);
        install_parallel_loop();
#if MAGI2NORM_HAS_CUDA
        default_acquire_context = halide_set_cuda_acquire_context(acquire_context);
        default_get_stream = halide_set_cuda_get_stream(get_stream);
#endif
    });
}

void *resolve_cuda_context(void *requested) {
#if MAGI2NORM_HAS_CUDA
    return requested ? requested : current_cuda_context();
#else
    return requested;
#endif
}

std::string take_halide_error() {
    std::string message;
    message.swap(last_error);
    return message;
}

const halide_device_interface_t *device_interface(Backend backend) {
#if MAGI2NORM_HAS_OPENCL
    if (backend == Backend::opencl) return halide_opencl_device_interface();
#endif
#if MAGI2NORM_HAS_CUDA
    if (backend == Backend::cuda) return halide_cuda_device_interface();
#endif
    throw Error(ErrorCode::device, std::string("this library was built without the ") + backend_name(backend) + " backend");
}

}  // namespace detail

const char *backend_name(Backend backend) {
    switch (backend) {
    case Backend::cpu: return "cpu";
    case Backend::opencl: return "opencl";
    case Backend::cuda: return "cuda";
    }
    return "unknown";
}

std::vector<Backend> compiled_backends() { return detail::compiled_kernel_backends(); }

bool backend_available(Backend backend, std::string *why) {
    if (backend == Backend::cpu) return true;
    try {
        // A one-element round trip through the device: loads the driver, finds a device.
        detail::install_halide_hooks();
        const halide_device_interface_t *interface = detail::device_interface(backend);
        detail::CallContext call;
        float probe = 1.0f;
        halide_dimension_t dim(0, 1, 1);
        halide_buffer_t buffer{};
        buffer.host = reinterpret_cast<std::uint8_t *>(&probe);
        buffer.type = halide_type_t(halide_type_float, 32);
        buffer.dimensions = 1;
        buffer.dim = &dim;
        buffer.flags = halide_buffer_flag_host_dirty;
        const int status = halide_copy_to_device(&call, &buffer, interface);
        halide_device_free(&call, &buffer);
        if (status != 0) {
            if (why) *why = std::string(backend_name(backend)) + " backend unavailable: " + detail::take_halide_error();
            return false;
        }
        return true;
    } catch (const Error &e) {
        if (why) *why = e.what();
        return false;
    }
}

namespace {

std::atomic<int> &default_backend_slot() {
    static std::atomic<int> slot([] {
        const char *env = std::getenv("MAGI2NORM_BACKEND");
        for (Backend b : {Backend::cpu, Backend::opencl, Backend::cuda}) {
            if (env && std::strcmp(env, backend_name(b)) == 0) return static_cast<int>(b);
        }
        return static_cast<int>(Backend::cpu);
    }());
    return slot;
}

}  // namespace

Backend default_backend() { return static_cast<Backend>(default_backend_slot().load()); }

void set_default_backend(Backend backend) { default_backend_slot().store(static_cast<int>(backend)); }

}  // namespace magi2norm
