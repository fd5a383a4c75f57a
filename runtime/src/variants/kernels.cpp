#include "kernels.hpp"

#include <array>
#include <cstdint>
#include <iterator>
#include <string>

#include "../devices/halide_calls.hpp"
#include "../devices/staging.hpp"
#include "kernel_args.hpp"
#include "magi2norm_variant_headers.h"

namespace magi2norm::detail {

namespace {

// One line a variant (cmake/Magi2normVariants.cmake, magi2norm_add_variants): its pipeline's
// name, backend, capability, form, streaming alignment, ISA, dtypes (x, y or dy, dx) and class.
#define MAGI2NORM_VARIANT(name, backend, cc, form, streaming_alignment, isa, in, out, dx, tuning_class, dim_min,     \
                          dim_max, bytes_min, bytes_max)                                                        \
    {Backend::backend, cc, Form::form, streaming_alignment, DType::in, DType::out, name##_argv, #name, tuning_class, \
     {dim_min, dim_max, bytes_min, bytes_max}, DType::dx, Isa::isa},
constexpr KernelEntry kKernels[] = {
#include "magi2norm_variant_list.inc"
};
#undef MAGI2NORM_VARIANT

// The table's untuned entry of each (backend, dtypes, form, stores) outside CUDA, whose variants
// differ by capability too, of the ISA `isa`: a call finds its variant in one step. -1 where the
// library has none.
constexpr int kKeys = 3 * 3 * 3 * 3 * kForms * 2;
constexpr int key_of(Backend backend, DType in, DType out, Form form, bool streaming, DType dx) {
    const int dx_key = is_backward(form) ? static_cast<int>(dx) : 0;
    return ((((static_cast<int>(backend) * 3 + static_cast<int>(in)) * 3 + static_cast<int>(out)) * 3 + dx_key) * kForms +
            static_cast<int>(form)) * 2 +
           (streaming ? 1 : 0);
}
constexpr std::array<int, kKeys> index_of(Isa isa) {
    std::array<int, kKeys> index{};
    for (int &i : index) i = -1;
    for (int i = 0; i < static_cast<int>(std::size(kKernels)); ++i) {
        const KernelEntry &k = kKernels[i];
        int &slot = index[key_of(k.backend, k.in, k.out, k.form, k.streaming_alignment > 0, k.dx)];
        if (k.backend != Backend::cuda && k.tuning_class == 0 && k.isa == isa && slot < 0) slot = i;
    }
    return index;
}
constexpr std::array<int, kKeys> kIndex = index_of(Isa::any);
constexpr std::array<int, kKeys> kBf16Index = index_of(Isa::avx512_bf16);

// The class entries, which a call scans before its untuned entry: none without a tuning record,
// and then no scan at all.
constexpr int kClassCount = [] {
    int n = 0;
    for (const KernelEntry &k : kKernels) n += k.tuning_class > 0 ? 1 : 0;
    return n;
}();
constexpr std::array<int, kClassCount> kClassIndex = [] {
    std::array<int, kClassCount> index{};
    int n = 0;
    for (int i = 0; i < static_cast<int>(std::size(kKernels)); ++i) {
        if (kKernels[i].tuning_class > 0) index[n++] = i;
    }
    return index;
}();

// What last_variant() reports: set once a kernel has completed.
thread_local const char *t_last_variant = "";

}  // namespace

bool serves_class(const KernelEntry &k, Backend backend, DType in, DType out, Form form, bool streaming, CallSize size, DType dx) {
    return k.tuning_class > 0 && k.backend == backend && k.in == in && k.out == out && k.form == form &&
           (k.streaming_alignment > 0) == streaming && (!is_backward(form) || k.dx == dx) && k.bounds.holds(size) &&
           cpu_runs(k.isa);
}

const KernelEntry *find_kernel(Backend backend, DType in, DType out, Form form, bool streaming, int device_capability,
                               CallSize size, DType dx) {
    // CUDA: only a class variant whose code the device can run (a record's classes are for the
    // capability it was measured at).
    if constexpr (kClassCount > 0) {
        for (const int i : kClassIndex) {
            const KernelEntry &k = kKernels[i];
            if ((backend != Backend::cuda || k.compute_capability <= device_capability) &&
                serves_class(k, backend, in, out, form, streaming, size, dx)) {
                return &k;
            }
        }
    }
    return untuned_kernel(backend, in, out, form, streaming, device_capability, dx);
}

const KernelEntry *untuned_kernel(Backend backend, DType in, DType out, Form form, bool streaming, int device_capability, DType dx) {
    if (backend != Backend::cuda) {
        const int key = key_of(backend, in, out, form, streaming, dx);
        if (kBf16Index[key] >= 0 && cpu_runs(Isa::avx512_bf16)) return &kKernels[kBf16Index[key]];
        const int i = kIndex[key];
        return i < 0 ? nullptr : &kKernels[i];
    }
    // CUDA: the variant of the highest capability the device has, else of the lowest (the driver
    // says whether it runs).
    const KernelEntry *best = nullptr, *lowest = nullptr;
    for (const KernelEntry &k : kKernels) {
        if (k.backend != backend || k.in != in || k.out != out || (k.streaming_alignment > 0) != streaming || k.form != form ||
            k.tuning_class > 0 || (is_backward(form) && k.dx != dx)) {
            continue;
        }
        if (!lowest || k.compute_capability < lowest->compute_capability) lowest = &k;
        if (k.compute_capability <= device_capability && (!best || k.compute_capability > best->compute_capability)) best = &k;
    }
    return best ? best : lowest;
}

int cpu_streaming_alignment() {
    constexpr int alignment = [] {
        for (const KernelEntry &k : kKernels) {
            if (k.backend == Backend::cpu && k.streaming_alignment > 0) return k.streaming_alignment;
        }
        return 0;
    }();
    return alignment;
}

const KernelEntry *kernel_named(std::string_view name) {
    for (const KernelEntry &k : kKernels) {
        if (name == k.name) return &k;
    }
    return nullptr;
}

std::vector<const KernelEntry *> class_kernels() {
    std::vector<const KernelEntry *> kernels;
    for (const int i : kClassIndex) kernels.push_back(&kKernels[i]);
    return kernels;
}

std::vector<Backend> compiled_kernel_backends() {
    std::vector<Backend> backends;
    for (const KernelEntry &k : kKernels) {
        if (backends.empty() || backends.back() != k.backend) backends.push_back(k.backend);
    }
    return backends;
}

void run_kernel(const KernelEntry &kernel, KernelArgs &args, Memory memory, const void *x, const void *scale,
                const void *ids, void *out, void *inverse_rms) {
    int status = 0;
    if (kernel.backend == Backend::cpu) {
        // Host memory as is: nothing to stage or free.
        args.x.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(x));
        args.scale.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(scale));
        args.ids.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(ids));
        args.out.buffer.host = static_cast<std::uint8_t *>(out);
        args.inverse_rms.buffer.host = static_cast<std::uint8_t *>(inverse_rms);
        status = kernel.fn(args.pack());
    } else {
        Staging staging(kernel.backend, memory, &args.context);
        staging.input(args.x.buffer, x);
        staging.input(args.scale.buffer, scale);
        staging.input(args.ids.buffer, ids);
        staging.output(args.out.buffer, out);
        if (inverse_rms) staging.output(args.inverse_rms.buffer, inverse_rms);
        status = kernel.fn(args.pack());
        if (status == 0) status = staging.finish(args.out.buffer);
        if (status == 0 && inverse_rms) status = staging.finish(args.inverse_rms.buffer);
    }
    if (status != 0) {
        throw Error(ErrorCode::device, std::string(backend_name(kernel.backend)) + " kernel failed (Halide status " +
                                           std::to_string(status) + "): " + take_halide_error());
    }
    t_last_variant = kernel.name;
}

void set_last_variant(const char *name) { t_last_variant = name; }

}  // namespace magi2norm::detail

namespace magi2norm {

const char *last_variant() { return detail::t_last_variant; }

}  // namespace magi2norm
