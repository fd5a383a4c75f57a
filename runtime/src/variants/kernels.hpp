// The AOT variants this library carries, forward and backward, as the one table the build
// generates from its family list (runtime/CMakeLists.txt), its one lookup, and the running of a
// forward variant on prepared buffers.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "isa.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::detail {

struct KernelArgs;

// Every variant's _argv entry point. The forward's: pointers to (user_context, x, scale,
// token_modality, group_start_1..15, eps, out), in that order, and inverse_rms last in that
// form; the backward's: (user_context, x, dy, scale, heads_per_dx_row, heads_per_pattern,
// block_tokens, eps, inverse_rms, inverse_rms_given, dx, partials).
using KernelFn = int (*)(void **args);

// The forms of the algorithm. The forward's (generators/magi2_norm_generator.cpp): over elements,
// over 32-bit words of two BF16 elements (define_paired_words), over one dense row (one_row), or
// over elements with each row's inverse RMS as a second output (inverse_rms: training). The
// backward's (generators/magi2_norm_backward_generator.cpp): dx rows that may add several dy rows
// (backward: singleton-head broadcasting), or one dy row each (backward_single: every other call).
// The mHC logits' (generators/magi2_mhc_logits_generator.cpp): the norm fused with its product
// with phi, out the logits' FP32; and their backward's dy and dphi (mhc_logits_backward).
enum class Form : std::uint8_t { elements, paired_words, one_row, inverse_rms, backward, backward_single, mhc_logits, mhc_logits_backward };
constexpr int kForms = 8;
constexpr int kForwardForms = 4;  // the forms before `backward`
constexpr bool is_backward(Form form) { return form == Form::backward || form == Form::backward_single; }

// What a tuning record's classes of calls are bounded by: the norm's D, and the bytes of the
// whole call (every input element's plus every output element's: x and y, or x, dy and dx).
struct CallSize {
    std::int64_t dim = 0;
    std::int64_t bytes = 0;
};

// The calls a class variant serves: D in [dim_min, dim_max], bytes in [bytes_min, bytes_max].
struct CallBounds {
    std::int64_t dim_min = 0, dim_max = INT64_MAX;
    std::int64_t bytes_min = 0, bytes_max = INT64_MAX;
    constexpr bool holds(CallSize size) const {
        return dim_min <= size.dim && size.dim <= dim_max && bytes_min <= size.bytes && size.bytes <= bytes_max;
    }
};

struct KernelEntry {
    Backend backend;
    int compute_capability;   // CUDA: the lowest device capability (x10) the PTX runs on; else 0
    Form form;
    int streaming_alignment;  // streaming-store variants: the output's (y, dx) alignment; else 0
    DType in, out;            // x and the forward's output: y, or the backward's dy
    KernelFn fn;
    const char *name;  // the pipeline's function name, which last_variant() reports
    // 0: the variant of its kind for every call; n: of class t<n> of the build's tuning record,
    // for the calls of its bounds (its family's name carries "_t<n>").
    int tuning_class = 0;
    CallBounds bounds;
    DType dx = DType::f32;  // the backward's dx; unused by the forward's forms
    Isa isa = Isa::any;     // what the CPU must run beyond Halide's own pick (cpu_runs)
};

// Whether `k` is a class variant of (backend, dtypes, form, stores) whose bounds hold `size` and
// whose code this CPU runs (cpu_runs); `dx`: the backward's dx dtype, ignored by the forward's forms.
bool serves_class(const KernelEntry &k, Backend backend, DType in, DType out, Form form, bool streaming, CallSize size,
                  DType dx = DType::f32);

// The variant of (backend, dtypes, form, stores) for a call of `size`, forward or backward (`dx`:
// the backward's dx dtype, ignored by the forward's forms): the first class variant that serves
// it (serves_class), else the kind's untuned variant: on a CPU that runs it (cpu_runs) the
// AVX-512 BF16 one where the library has it; for CUDA the one built for the highest capability
// the device has (the lowest built when the capability is unknown: its failure then names the
// cause). Null when the library has none.
const KernelEntry *find_kernel(Backend backend, DType in, DType out, Form form, bool streaming, int device_capability,
                               CallSize size, DType dx = DType::f32);

// find_kernel's variant for a call no class holds: what a build without a tuning record runs.
const KernelEntry *untuned_kernel(Backend backend, DType in, DType out, Form form, bool streaming, int device_capability,
                                  DType dx = DType::f32);

// The variant named `name` (its pipeline's function name, as last_variant() reports it), or null.
const KernelEntry *kernel_named(std::string_view name);

// The library's class variants, in the table's order (none in a build without a tuning record).
std::vector<const KernelEntry *> class_kernels();

// The output alignment the CPU streaming-store variants need; 0 when the library has none.
int cpu_streaming_alignment();

// The backends that have variants in this library.
std::vector<Backend> compiled_kernel_backends();

// Runs the forward variant `kernel` over `args` (Halide's hooks installed: install_halide_hooks) with the call's
// memory attached: host memory as is (CPU), host memory
// staged through the device and back (GPU backend), or device memory wrapped in place;
// `inverse_rms` is the training form's second output (null for the other forms). Throws
// Error(device) with Halide's message when it fails; then sets last_variant().
void run_kernel(const KernelEntry &kernel, KernelArgs &args, Memory memory, const void *x, const void *scale,
                const void *ids, void *out, void *inverse_rms);

// What last_variant() reports from now on: the backward's variant once it has completed.
void set_last_variant(const char *name);

}  // namespace magi2norm::detail
