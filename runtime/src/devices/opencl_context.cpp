#include "opencl_context.hpp"

#include "halide_calls.hpp"

#if MAGI2NORM_HAS_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdlib>
#include <mutex>
#include <string>

// Part of Halide's OpenCL runtime (in this library): looks an OpenCL function up in the OpenCL
// library Halide loads, so that this library never links libOpenCL itself.
extern "C" void *halide_opencl_get_symbol(void *user_context, const char *name);

namespace magi2norm::detail {

namespace {

template <typename Fn>
Fn cl_function(const char *name) {
    return reinterpret_cast<Fn>(halide_opencl_get_symbol(nullptr, name));
}

// Held from acquire to release, as Halide's default holds its spin lock: Halide's OpenCL runtime
// keeps per-process state that concurrent calls must not share.
std::mutex call_mutex;
cl_context own_context = nullptr;
cl_command_queue own_queue = nullptr;

bool contains(const char *text, const char *part) { return std::string(text).find(part) != std::string::npos; }

// Halide's default choice: the first platform whose name contains HL_OCL_PLATFORM_NAME (or the
// first platform), among its devices of the types in HL_OCL_DEVICE_TYPE (cpu, gpu, acc; all when
// unset) device HL_GPU_DEVICE, or the one with the most compute units.
std::string create_own_context(void *user_context) {
    const auto get_platforms = cl_function<decltype(&clGetPlatformIDs)>("clGetPlatformIDs");
    const auto platform_info = cl_function<decltype(&clGetPlatformInfo)>("clGetPlatformInfo");
    const auto get_devices = cl_function<decltype(&clGetDeviceIDs)>("clGetDeviceIDs");
    const auto device_info = cl_function<decltype(&clGetDeviceInfo)>("clGetDeviceInfo");
    const auto create_context = cl_function<decltype(&clCreateContext)>("clCreateContext");
    const auto create_queue = cl_function<decltype(&clCreateCommandQueue)>("clCreateCommandQueue");
    if (!get_platforms || !platform_info || !get_devices || !device_info || !create_context || !create_queue) {
        return "the OpenCL library is missing or incomplete";
    }
    cl_platform_id platforms[16];
    cl_uint platform_count = 0;
    if (get_platforms(16, platforms, &platform_count) != CL_SUCCESS || platform_count == 0) return "no OpenCL platform";
    cl_platform_id platform = platforms[0];
    if (const char *wanted = std::getenv("HL_OCL_PLATFORM_NAME")) {
        platform = nullptr;
        for (cl_uint i = 0; i < platform_count && !platform; ++i) {
            char name[256] = {};
            if (platform_info(platforms[i], CL_PLATFORM_NAME, sizeof name - 1, name, nullptr) == CL_SUCCESS &&
                contains(name, wanted)) {
                platform = platforms[i];
            }
        }
        if (!platform) return std::string("no OpenCL platform named like HL_OCL_PLATFORM_NAME=") + wanted;
    }
    cl_device_type type = 0;
    if (const char *types = std::getenv("HL_OCL_DEVICE_TYPE")) {
        if (contains(types, "cpu")) type |= CL_DEVICE_TYPE_CPU;
        if (contains(types, "gpu")) type |= CL_DEVICE_TYPE_GPU;
        if (contains(types, "acc")) type |= CL_DEVICE_TYPE_ACCELERATOR;
    }
    cl_device_id devices[64];
    cl_uint device_count = 0;
    if (get_devices(platform, type ? type : CL_DEVICE_TYPE_ALL, 64, devices, &device_count) != CL_SUCCESS ||
        device_count == 0) {
        return "no OpenCL device";
    }
    int chosen = halide_get_gpu_device(user_context);
    if (chosen < 0) {
        cl_uint most = 0;
        for (cl_uint i = 0; i < device_count; ++i) {
            cl_uint units = 0;
            if (device_info(devices[i], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr) == CL_SUCCESS &&
                (chosen < 0 || units > most)) {
                chosen = static_cast<int>(i);
                most = units;
            }
        }
    }
    if (chosen < 0 || chosen >= static_cast<int>(device_count)) return "no usable OpenCL device";
    cl_int status = CL_SUCCESS;
    cl_context context = create_context(nullptr, 1, &devices[chosen], nullptr, nullptr, &status);
    if (status != CL_SUCCESS) return "clCreateContext failed (" + std::to_string(status) + ")";
    cl_command_queue queue = create_queue(context, devices[chosen], 0, &status);
    if (status != CL_SUCCESS) {
        cl_function<decltype(&clReleaseContext)>("clReleaseContext")(context);
        return "clCreateCommandQueue failed (" + std::to_string(status) + ")";
    }
    own_context = context;
    own_queue = queue;
    return {};
}

}  // namespace

void *opencl_queue_context(void *queue) {
    // Asked on every OpenCL call that does not name its context: looked up once.
    static const auto queue_info = cl_function<decltype(&clGetCommandQueueInfo)>("clGetCommandQueueInfo");
    cl_context context = nullptr;
    if (!queue_info || queue_info(static_cast<cl_command_queue>(queue), CL_QUEUE_CONTEXT, sizeof context, &context,
                                  nullptr) != CL_SUCCESS) {
        throw Error(ErrorCode::device, "the OpenCL command queue of the call is not valid");
    }
    return context;
}

void *opencl_upload(void *context, const void *host, std::size_t bytes) {
    const auto create_buffer = cl_function<decltype(&clCreateBuffer)>("clCreateBuffer");
    cl_int status = CL_SUCCESS;
    cl_mem mem = create_buffer ? create_buffer(static_cast<cl_context>(context), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                               bytes, const_cast<void *>(host), &status)
                               : nullptr;
    if (!mem || status != CL_SUCCESS) {
        throw Error(ErrorCode::device, "cannot upload the scale to the OpenCL device (status " + std::to_string(status) + ")");
    }
    return mem;
}

OpenclExtent opencl_extent(const void *mem) {
    static const auto mem_info = cl_function<decltype(&clGetMemObjectInfo)>("clGetMemObjectInfo");
    auto *m = static_cast<cl_mem>(const_cast<void *>(mem));
    std::size_t size = 0, offset = 0;
    cl_mem parent = nullptr;
    if (!mem_info || mem_info(m, CL_MEM_SIZE, sizeof size, &size, nullptr) != CL_SUCCESS ||
        mem_info(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, nullptr) != CL_SUCCESS ||
        mem_info(m, CL_MEM_OFFSET, sizeof offset, &offset, nullptr) != CL_SUCCESS) {
        throw Error(ErrorCode::device, "a view's data is not a valid OpenCL buffer (cl_mem)");
    }
    // Sub-buffers are carved from buffers only, never from other sub-buffers: one level.
    return {parent ? parent : m, parent ? offset : 0, size};
}

void opencl_release(void *mem) { cl_function<decltype(&clReleaseMemObject)>("clReleaseMemObject")(static_cast<cl_mem>(mem)); }

}  // namespace magi2norm::detail

// Halide's OpenCL runtime calls these around every use of a context: acquire, then the matching
// release, which the caller of acquire makes whatever acquire returned.
extern "C" int halide_acquire_cl_context(void *user_context, cl_context *context, cl_command_queue *queue, bool create) {
    using namespace magi2norm::detail;
    call_mutex.lock();
    const auto *call = static_cast<const CallContext *>(user_context);
    if (call && call->stream) {
        *context = static_cast<cl_context>(call->context);
        *queue = static_cast<cl_command_queue>(call->stream);
        return 0;
    }
    if (!own_context && create) {
        const std::string why = create_own_context(user_context);
        if (!why.empty()) {
            halide_error(user_context, ("OpenCL: " + why).c_str());
            return -1;
        }
    }
    *context = own_context;
    *queue = own_queue;
    return 0;
}

extern "C" int halide_release_cl_context(void *) {
    magi2norm::detail::call_mutex.unlock();
    return 0;
}

// The options Halide's OpenCL runtime builds the variants' programs with (it asks before each
// build). OpenCL's FP32 sqrt and divide may be off by ulps on real GPUs unless the program asks
// for correct rounding, which the CPU has: so it asks. HL_OCL_BUILD_OPTIONS, when set, follows.
extern "C" const char *halide_opencl_get_build_options(void *) {
    static const std::string options = [] {
        std::string o = "-cl-fp32-correctly-rounded-divide-sqrt";
        if (const char *more = std::getenv("HL_OCL_BUILD_OPTIONS")) o += std::string(" ") + more;
        return o;
    }();
    return options.c_str();
}

#else  // built without the OpenCL backend: no OpenCL call can get here, but say so if one does

namespace magi2norm::detail {

namespace {
[[noreturn]] void no_opencl() { throw Error(ErrorCode::device, "this library was built without the opencl backend"); }
}  // namespace

void *opencl_queue_context(void *) { no_opencl(); }
void *opencl_upload(void *, const void *, std::size_t) { no_opencl(); }
OpenclExtent opencl_extent(const void *) { no_opencl(); }
void opencl_release(void *) {}

}  // namespace magi2norm::detail

#endif
