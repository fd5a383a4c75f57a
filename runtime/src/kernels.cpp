#include "kernels.hpp"

#include <cstdint>
#include <string>

#include "halide_calls.hpp"
#include "kernel_args.hpp"
#include "magi2norm_kernel_headers.h"
#if MAGI2NORM_HAS_CUDA
#include "HalideRuntimeCuda.h"
#endif
#if MAGI2NORM_HAS_OPENCL
#include "HalideRuntimeOpenCL.h"
#endif

namespace magi2norm::detail {

namespace {

struct KernelEntry {
    Backend backend;
    int compute_capability;  // CUDA: the lowest device capability (x10) the PTX runs on; else 0
    int stream_alignment;    // streaming-store variants: the output alignment they need; else 0
    bool paired_words;       // x and out as uint32 words of two BF16 elements (takes_paired_words)
    DType in, out;
    KernelFn fn;
    const char *name;  // the pipeline's function name
};

#define MAGI2NORM_KERNEL(family, backend, cc, stream_alignment, paired, in, out)                     \
    {Backend::backend, cc, stream_alignment, paired != 0, DType::in, DType::out,                     \
     magi2_norm_##family##_##in##_##out##_argv, "magi2_norm_" #family "_" #in "_" #out},
constexpr KernelEntry kKernels[] = {
#include "magi2norm_kernel_list.inc"
};
#undef MAGI2NORM_KERNEL

// The output alignment the CPU streaming-store variants need, or 0 when the library has none.
constexpr int cpu_streaming_alignment() {
    for (const KernelEntry &k : kKernels) {
        if (k.backend == Backend::cpu && k.stream_alignment > 0) return k.stream_alignment;
    }
    return 0;
}

// The variant for the dtype pair, with streaming stores or without, paired-word or element
// form; for CUDA the one built for the highest capability the device has (or the lowest built,
// when the capability is unknown: its failure then names the cause).
const KernelEntry &find_kernel(Backend backend, DType in, DType out, bool streaming, bool paired, int device_capability) {
    const KernelEntry *best = nullptr, *lowest = nullptr;
    for (const KernelEntry &k : kKernels) {
        if (k.backend != backend || k.in != in || k.out != out || (k.stream_alignment > 0) != streaming ||
            k.paired_words != paired) {
            continue;
        }
        // Only CUDA has more than one variant per pair; elsewhere the first match ends the
        // search (scanning all 45 entries took ~150 instructions a call, callgrind, NOTES.md).
        if (backend != Backend::cuda) return k;
        if (!lowest || k.compute_capability < lowest->compute_capability) lowest = &k;
        if (k.compute_capability <= device_capability && (!best || k.compute_capability > best->compute_capability)) best = &k;
    }
    if (!best) best = lowest;
    if (best) return *best;
    throw Error(ErrorCode::device, std::string("this library has no ") + backend_name(backend) + " kernel for " +
                                       dtype_name(in) + " -> " + dtype_name(out));
}


// How the buffers of one call meet the backend's memory: host memory as is (CPU), host memory
// staged through the device (GPU backend, host views), or device memory wrapped in place.
class Staging {
public:
    Staging(const KernelCall &call, CallContext *context) : call_(call), context_(context) {
        if (call.backend != Backend::cpu) interface_ = device_interface(call.backend);
    }
    Staging(const Staging &) = delete;
    Staging &operator=(const Staging &) = delete;
    ~Staging() {
        // Device copies of host views are freed; wrapped device memory is only detached; CPU
        // buffers have neither.
        if (interface_ == nullptr) return;
        for (std::size_t i = 0; i < count_; ++i) {
            if (wrapped_) {
                detach(buffers_[i]);
            } else {
                halide_device_free(context_, buffers_[i]);
            }
        }
    }

    // An input: host memory (marked dirty so a GPU variant copies it in) or device memory.
    void input(halide_buffer_t &b, const void *data) { attach(b, data, halide_buffer_flag_host_dirty); }
    void output(halide_buffer_t &b, void *data) { attach(b, data, 0); }

    // After the kernel: a GPU output staged from host memory comes back.
    int finish(halide_buffer_t &out) {
        if (interface_ == nullptr || wrapped_) return 0;
        return halide_copy_to_host(context_, &out);
    }

private:
    void attach(halide_buffer_t &b, const void *data, std::uint64_t host_flags) {
        buffers_[count_++] = &b;
        if (call_.memory == Memory::device) {
            wrapped_ = true;
            wrap(b, data);
            return;
        }
        b.host = static_cast<std::uint8_t *>(const_cast<void *>(data));
        if (interface_ != nullptr) b.flags = host_flags;
    }

    void wrap(halide_buffer_t &b, const void *data) {
#if MAGI2NORM_HAS_CUDA
        if (call_.backend == Backend::cuda) {
            if (halide_cuda_wrap_device_ptr(context_, &b, reinterpret_cast<std::uint64_t>(data)) != 0) {
                throw Error(ErrorCode::device, "cannot wrap a CUDA device pointer: " + take_halide_error());
            }
            return;
        }
#endif
#if MAGI2NORM_HAS_OPENCL
        if (call_.backend == Backend::opencl) {
            if (halide_opencl_wrap_cl_mem(context_, &b, reinterpret_cast<std::uint64_t>(data)) != 0) {
                throw Error(ErrorCode::device, "cannot wrap an OpenCL buffer: " + take_halide_error());
            }
            return;
        }
#endif
        (void)b;
        (void)data;
        throw Error(ErrorCode::device, std::string("device-memory views need the cuda or opencl backend, not ") +
                                           backend_name(call_.backend));
    }

    void detach(halide_buffer_t *b) {
        if (b->device == 0) return;
#if MAGI2NORM_HAS_CUDA
        if (call_.backend == Backend::cuda) halide_cuda_detach_device_ptr(context_, b);
#endif
#if MAGI2NORM_HAS_OPENCL
        if (call_.backend == Backend::opencl) halide_opencl_detach_cl_mem(context_, b);
#endif
    }

    const KernelCall &call_;
    CallContext *context_;
    const halide_device_interface_t *interface_ = nullptr;
    halide_buffer_t *buffers_[4] = {};
    std::size_t count_ = 0;
    bool wrapped_ = false;
};

// What last_variant() reports: set once a kernel has completed.
thread_local const char *t_last_variant = "";

}  // namespace

std::vector<Backend> compiled_kernel_backends() {
    std::vector<Backend> backends;
    for (const KernelEntry &k : kKernels) {
        if (backends.empty() || backends.back() != k.backend) backends.push_back(k.backend);
    }
    return backends;
}

bool takes_streaming_stores(const KernelCall &c) {
    constexpr std::int64_t alignment = cpu_streaming_alignment();
    if (alignment == 0 || c.backend != Backend::cpu || c.memory != Memory::host) return false;
    const StreamingPolicy policy = streaming_policy();
    const KernelLayout &l = c.layout;
    const auto elem = static_cast<std::int64_t>(dtype_size(c.out_dtype));
    std::int64_t elements = 1;
    for (const std::int64_t e : l.extent) elements *= e;
    if (policy.min_output_bytes <= 0 || elements * elem < policy.min_output_bytes || elem < policy.min_element_bytes ||
        l.extent[0] < policy.min_row_elements) {
        return false;
    }
    // The layout the variants require (generators/magi2_norm_generator.cpp, require_streaming_layout).
    if (reinterpret_cast<std::uintptr_t>(c.out) % alignment != 0 || l.out_stride[0] != 1 || l.extent[0] * elem % alignment != 0) {
        return false;
    }
    for (int i = 1; i < 4; ++i) {
        if (l.extent[i] != 1 && l.out_stride[i] * elem % alignment != 0) return false;
    }
    return true;
}

bool takes_paired_words(const KernelCall &c) {
    if (c.paired_scale == nullptr || c.backend != Backend::cpu || c.memory != Memory::host ||
        c.in_dtype != DType::bf16 || c.out_dtype != DType::bf16) {
        return false;
    }
    const KernelLayout &l = c.layout;
    if (l.extent[0] % kPairedVectorElements != 0 || l.x_stride[0] != 1 || l.out_stride[0] != 1 ||
        reinterpret_cast<std::uintptr_t>(c.x) % 4 != 0 || reinterpret_cast<std::uintptr_t>(c.out) % 4 != 0) {
        return false;
    }
    for (int i = 1; i < 4; ++i) {
        if (l.extent[i] != 1 && (l.x_stride[i] % 2 != 0 || l.out_stride[i] % 2 != 0)) return false;
    }
    return true;
}

std::vector<float> paired_word_scale(const std::vector<float> &scale, std::int64_t dim) {
    constexpr std::size_t block = kPairedVectorElements, half = block / 2;
    if (dim % kPairedVectorElements != 0) return {};
    std::vector<float> paired(scale.size());
    for (std::size_t start = 0; start < scale.size(); start += block) {
        for (std::size_t i = 0; i < half; ++i) {
            paired[start + i] = scale[start + 2 * i];
            paired[start + half + i] = scale[start + 2 * i + 1];
        }
    }
    return paired;
}

void run_kernel(const KernelCall &c) {
    install_halide_hooks();
    const int capability = c.backend == Backend::cuda ? cuda_compute_capability(c.gpu_context) : 0;
    const bool paired = takes_paired_words(c);
    const KernelEntry &kernel = find_kernel(c.backend, c.in_dtype, c.out_dtype, takes_streaming_stores(c), paired, capability);
    KernelArgs k(c, paired);
    Staging staging(c, &k.context);
    staging.input(k.x.buffer, c.x);
    staging.input(k.scale.buffer, paired ? c.paired_scale : c.scale);
    staging.input(k.ids.buffer, c.token_ids ? c.token_ids : c.zero_id);
    staging.output(k.out.buffer, c.out);
    int status = kernel.fn(k.pack());
    if (status == 0) status = staging.finish(k.out.buffer);
    if (status != 0) {
        throw Error(ErrorCode::device, std::string(backend_name(c.backend)) + " kernel failed (Halide status " +
                                           std::to_string(status) + "): " + take_halide_error());
    }
    t_last_variant = kernel.name;
}

}  // namespace magi2norm::detail

namespace magi2norm {

const char *last_variant() { return detail::t_last_variant; }

}  // namespace magi2norm
