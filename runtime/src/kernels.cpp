#include "kernels.hpp"

#include <string>

#include "halide_calls.hpp"
#include "magi2norm_kernel_headers.h"
#if MAGI2NORM_HAS_CUDA
#include "HalideRuntimeCuda.h"
#endif

namespace magi2norm::detail {

namespace {

// Every variant's _argv entry point: pointers to (user_context, x, scale, token_modality,
// group_start_1..15, eps, out), in that order.
using KernelFn = int (*)(void **args);

struct KernelEntry {
    Backend backend;
    int compute_capability;  // CUDA: the lowest device capability (x10) the PTX runs on; else 0
    DType in, out;
    KernelFn fn;
};

#define MAGI2NORM_KERNEL(family, backend, cc, in, out) \
    {Backend::backend, cc, DType::in, DType::out, magi2_norm_##family##_##in##_##out##_argv},
constexpr KernelEntry kKernels[] = {
#include "magi2norm_kernel_list.inc"
};
#undef MAGI2NORM_KERNEL

// The variant for the dtype pair; for CUDA the one built for the highest capability the device
// has (or the lowest built, when the capability is unknown: its failure then names the cause).
KernelFn find_kernel(Backend backend, DType in, DType out, int device_capability) {
    const KernelEntry *best = nullptr, *lowest = nullptr;
    for (const KernelEntry &k : kKernels) {
        if (k.backend != backend || k.in != in || k.out != out) continue;
        if (!lowest || k.compute_capability < lowest->compute_capability) lowest = &k;
        if (k.compute_capability <= device_capability && (!best || k.compute_capability > best->compute_capability)) best = &k;
    }
    if (!best) best = lowest;
    if (best) return best->fn;
    throw Error(ErrorCode::device, std::string("this library has no ") + backend_name(backend) + " kernel for " +
                                       dtype_name(in) + " -> " + dtype_name(out));
}

halide_type_t storage_type(DType dtype) {
    return dtype == DType::f32 ? halide_type_t(halide_type_float, 32) : halide_type_t(halide_type_uint, 16);
}

// A halide_buffer_t over the caller's memory, with its dimensions stored alongside.
template <int N>
struct HalideBuffer {
    halide_buffer_t buffer{};
    halide_dimension_t dims[N]{};

    explicit HalideBuffer(halide_type_t type) {
        buffer.type = type;
        buffer.dimensions = N;
        buffer.dim = dims;
    }
    HalideBuffer(const HalideBuffer &) = delete;
    HalideBuffer &operator=(const HalideBuffer &) = delete;
    void set_dim(int i, std::int64_t extent, std::int64_t stride) {
        dims[i] = halide_dimension_t(0, static_cast<std::int32_t>(extent), static_cast<std::int32_t>(stride));
    }
};

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
        // Device copies of host views are freed; wrapped device memory is only detached.
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
        (void)b;
        (void)data;
        throw Error(ErrorCode::device, std::string("device-memory views are supported with the CUDA backend, not ") +
                                           backend_name(call_.backend));
    }

    void detach(halide_buffer_t *b) {
#if MAGI2NORM_HAS_CUDA
        if (b->device != 0) halide_cuda_detach_device_ptr(context_, b);
#else
        (void)b;
#endif
    }

    const KernelCall &call_;
    CallContext *context_;
    const halide_device_interface_t *interface_ = nullptr;
    halide_buffer_t *buffers_[4] = {};
    std::size_t count_ = 0;
    bool wrapped_ = false;
};

}  // namespace

std::vector<Backend> compiled_kernel_backends() {
    std::vector<Backend> backends;
    for (const KernelEntry &k : kKernels) {
        if (backends.empty() || backends.back() != k.backend) backends.push_back(k.backend);
    }
    return backends;
}

void run_kernel(const KernelCall &c) {
    install_halide_hooks();
    const int capability = c.backend == Backend::cuda ? cuda_compute_capability(c.cuda_context) : 0;
    const KernelFn fn = find_kernel(c.backend, c.in_dtype, c.out_dtype, capability);
    const KernelLayout &l = c.layout;
    CallContext context{c.cuda_context, c.cuda_stream};

    HalideBuffer<4> x(storage_type(c.in_dtype)), out(storage_type(c.out_dtype));
    for (int axis = 0; axis < 4; ++axis) {
        x.set_dim(axis, l.extent[axis], l.x_stride[axis]);
        out.set_dim(axis, l.extent[axis], l.out_stride[axis]);
    }
    HalideBuffer<3> scale(halide_type_t(halide_type_float, 32));
    scale.set_dim(0, c.dim, 1);
    scale.set_dim(1, l.extent[1], l.scale_h_stride);
    scale.set_dim(2, c.num_modality, c.num_patterns * c.dim);
    // Without per-token ids every token reads id 0 through a stride-0 view of one zero.
    HalideBuffer<1> ids(halide_type_t(halide_type_int, 32));
    ids.set_dim(0, l.extent[3], c.token_ids ? 1 : 0);

    Staging staging(c, &context);
    staging.input(x.buffer, c.x);
    staging.input(scale.buffer, c.scale);
    staging.input(ids.buffer, c.token_ids ? c.token_ids : c.zero_id);
    staging.output(out.buffer, c.out);

    void *user_context = &context;
    std::array<std::int32_t, kMaxGroups - 1> starts = c.group_starts;
    float eps = c.eps;
    std::array<void *, 1 + 3 + kMaxGroups - 1 + 2> args{};
    std::size_t n = 0;
    args[n++] = &user_context;
    args[n++] = &x.buffer;
    args[n++] = &scale.buffer;
    args[n++] = &ids.buffer;
    for (std::int32_t &start : starts) args[n++] = &start;
    args[n++] = &eps;
    args[n++] = &out.buffer;
    int status = fn(args.data());
    if (status == 0) status = staging.finish(out.buffer);
    if (status != 0) {
        throw Error(ErrorCode::device, std::string(backend_name(c.backend)) + " kernel failed (Halide status " +
                                           std::to_string(status) + "): " + take_halide_error());
    }
}

}  // namespace magi2norm::detail
