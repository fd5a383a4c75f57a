// The torch ops magi2norm::forward, ::normalize, ::normalize_out and ::backward on the LibTorch
// stable ABI, for CPU and CUDA tensors, and ::mhc_logits and ::mhc_logits_backward (the mHC norm
// fused with its product with phi, SPEC.md "The mHC logits") for CPU tensors. Their fake kernels and autograd are registered from
// Python (magi2norm/ops.py); these are the real kernels, with nothing per call in Python.
//
// out_dtype is the library's dtype code (0 float32, 1 bfloat16, 2 float16; None: x's dtype), not
// a ScalarType: AOTInductor's proxy executor (torch 2.11) hands a packaged model's ScalarType
// arguments to an op in export's own numbering, so bfloat16 arrived as QUInt8.
//
// forward returns (y, inverse_rms): the training form, whose FP32 inverse RMS over y's rows
// (the value y was scaled by, bit for bit) the backward takes instead of summing the rows'
// squares again. normalize returns y alone: the CPU forms that do not write the inverse RMS are
// faster (docs/python.md), and inference needs none. normalize_out writes a preallocated y.
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <magi2norm/magi2norm.hpp>

#include "norm_cache.hpp"
#include "output_pool.hpp"
#include "torch_runtime.hpp"
#include "torch_tensors.hpp"

namespace magi2norm_torch {

namespace {

using torch::headeronly::ScalarType;

// A library error as torch raises it: a RuntimeError whose message starts with the error's
// code, which magi2norm/ops.py turns into magi2norm.Error.
[[noreturn]] void rethrow(const magi2norm::Error &e) {
    throw std::runtime_error(std::string("magi2norm.Error: ") + magi2norm::error_code_name(e.code()) + ": " + e.what());
}

magi2norm::NormConfig config_of(std::int64_t dim, double eps, std::int64_t num_modality, std::int64_t num_patterns) {
    return {dim, static_cast<float>(eps), num_modality, num_patterns, std::nullopt};
}

// On CUDA the input's device is made current for the call (the library runs on the current
// context), as torch's own kernels do.
std::optional<torch::stable::accelerator::DeviceGuard> device_guard(const Tensor &x) {
    if (!x.is_cuda()) return std::nullopt;
    return std::make_optional<torch::stable::accelerator::DeviceGuard>(x.get_device_index());
}

template <typename Options>
void set_execution(Options &options, const Tensor &x) {
    options.stream = stream_for(x);
    if (!x.is_cuda()) {
        options.parallel_loop = torch_parallel_loop();
        options.num_threads = torch_num_threads();
    }
}

void run_forward(const magi2norm::RMSNorm &norm, const Tensor &x, const std::optional<Tensor> &group_sizes,
                 const std::optional<Tensor> &modality_ids, const Tensor &out, const std::optional<Tensor> &inverse_rms) {
    const auto guard = device_guard(x);
    std::optional<Tensor> held;
    const magi2norm::Grouping grouping = grouping_of(x, group_sizes, modality_ids, held);
    magi2norm::CallOptions options;
    options.out_dtype = dtype_of(out.scalar_type(), "out");
    set_execution(options, x);
    if (inverse_rms) options.inverse_rms = view_of(*inverse_rms, "inverse_rms");
    norm.forward(view_of(x, "x"), grouping, view_of(out, "out"), options);
}

// A new contiguous tensor on x's device: a large CPU one from the pool where this torch takes it.
Tensor new_tensor(const Tensor &x, const std::vector<std::int64_t> &shape, ScalarType dtype) {
    if (x.is_cpu()) {
        if (std::optional<Tensor> pooled = pooled_cpu_tensor(shape, dtype)) return *pooled;
    }
    return torch::stable::new_empty(x, shape, dtype);
}

// A new y for x: the norm's output shape (SPEC.md's broadcasting) and dtype.
Tensor new_output(const magi2norm::RMSNorm &norm, const Tensor &x, std::optional<std::int64_t> out_dtype) {
    const std::vector<std::int64_t> shape = norm.output_shape({x.sizes().begin(), x.sizes().end()});
    const std::optional<magi2norm::DType> override = out_dtype ? std::optional(dtype_of_code(*out_dtype)) : std::nullopt;
    return new_tensor(x, shape, scalar_type_of(norm.output_dtype(dtype_of(x.scalar_type(), "x"), override)));
}

std::tuple<Tensor, Tensor> forward(Tensor x, Tensor weight, std::optional<Tensor> group_sizes,
                                   std::optional<Tensor> modality_ids, std::int64_t dim, double eps,
                                   std::int64_t num_modality, std::int64_t num_patterns,
                                   std::optional<std::int64_t> out_dtype) try {
    const auto norm = norm_for(weight, config_of(dim, eps, num_modality, num_patterns));
    Tensor out = new_output(*norm, x, out_dtype);
    const std::vector<std::int64_t> rows(out.sizes().begin(), out.sizes().end() - 1);
    Tensor inverse_rms = torch::stable::new_empty(x, rows, ScalarType::Float);
    run_forward(*norm, x, group_sizes, modality_ids, out, inverse_rms);
    return {out, inverse_rms};
} catch (const magi2norm::Error &e) {
    rethrow(e);
}

Tensor normalize(Tensor x, Tensor weight, std::optional<Tensor> group_sizes, std::optional<Tensor> modality_ids,
                 std::int64_t dim, double eps, std::int64_t num_modality, std::int64_t num_patterns,
                 std::optional<std::int64_t> out_dtype) try {
    const auto norm = norm_for(weight, config_of(dim, eps, num_modality, num_patterns));
    Tensor out = new_output(*norm, x, out_dtype);
    run_forward(*norm, x, group_sizes, modality_ids, out, std::nullopt);
    return out;
} catch (const magi2norm::Error &e) {
    rethrow(e);
}

void normalize_out(Tensor x, Tensor weight, std::optional<Tensor> group_sizes, std::optional<Tensor> modality_ids,
                     std::int64_t dim, double eps, std::int64_t num_modality, std::int64_t num_patterns, Tensor out) try {
    const auto norm = norm_for(weight, config_of(dim, eps, num_modality, num_patterns));
    run_forward(*norm, x, group_sizes, modality_ids, out, std::nullopt);
} catch (const magi2norm::Error &e) {
    rethrow(e);
}

std::tuple<Tensor, Tensor> backward(Tensor dy, Tensor x, Tensor weight, std::optional<Tensor> inverse_rms,
                                    std::optional<Tensor> group_sizes, std::optional<Tensor> modality_ids,
                                    std::int64_t dim, double eps, std::int64_t num_modality,
                                    std::int64_t num_patterns) try {
    const auto guard = device_guard(x);
    std::optional<Tensor> held;
    const magi2norm::Grouping grouping = grouping_of(x, group_sizes, modality_ids, held);
    const auto norm = norm_for(weight, config_of(dim, eps, num_modality, num_patterns));
    // dy in x's dtype or FP32 (the library's two forms); any other dtype as FP32.
    const Tensor dy_in = dy.scalar_type() == x.scalar_type() || dy.scalar_type() == ScalarType::Float
                             ? dy
                             : torch::stable::to(dy, ScalarType::Float);
    Tensor dx = new_tensor(x, {x.sizes().begin(), x.sizes().end()}, x.scalar_type());
    Tensor dweight = torch::stable::new_empty(weight, {weight.sizes().begin(), weight.sizes().end()}, weight.scalar_type());
    magi2norm::BackwardOptions options;
    options.dx_dtype = dtype_of(x.scalar_type(), "x");
    set_execution(options, x);
    if (inverse_rms) options.inverse_rms = view_of(*inverse_rms, "inverse_rms");
    norm->backward(view_of(x, "x"), view_of(dy_in, "dy"), grouping, view_of(dx, "dx"), view_of(dweight, "dweight"), options);
    return {dx, dweight};
} catch (const magi2norm::Error &e) {
    rethrow(e);
}

// (logits [T, N] FP32, inverse_rms [T] FP32) of x [T, D] or [T, S, C] and phi [D, N] FP32.
std::tuple<Tensor, Tensor> mhc_logits(Tensor x, Tensor weight, Tensor phi, std::optional<Tensor> group_sizes,
                                      std::optional<Tensor> modality_ids, std::int64_t dim, double eps,
                                      std::int64_t num_modality) try {
    std::optional<Tensor> held;
    const magi2norm::Grouping grouping = grouping_of(x, group_sizes, modality_ids, held);
    const auto norm = norm_for(weight, config_of(dim, eps, num_modality, 1));
    const std::int64_t tokens = x.dim() > 0 ? x.size(0) : 0, columns = phi.dim() == 2 ? phi.size(1) : 0;
    Tensor logits = torch::stable::new_empty(x, {tokens, columns}, ScalarType::Float);
    Tensor inverse_rms = torch::stable::new_empty(x, {tokens}, ScalarType::Float);
    magi2norm::MhcLogitsOptions options;
    options.parallel_loop = torch_parallel_loop();
    options.num_threads = torch_num_threads();
    options.inverse_rms = view_of(inverse_rms, "inverse_rms");
    norm->mhc_logits(view_of(x, "x"), grouping, view_of(phi, "phi"), view_of(logits, "logits"), options);
    return {logits, inverse_rms};
} catch (const magi2norm::Error &e) {
    rethrow(e);
}

// (dx, dweight, dphi) of mhc_logits for dlogits, from the forward's inverse RMS: dx in x's dtype,
// dweight in the weight's, dphi FP32.
std::tuple<Tensor, Tensor, Tensor> mhc_logits_backward(Tensor dlogits, Tensor x, Tensor weight, Tensor phi, Tensor inverse_rms,
                                                       std::optional<Tensor> group_sizes, std::optional<Tensor> modality_ids,
                                                       std::int64_t dim, double eps, std::int64_t num_modality) try {
    std::optional<Tensor> held;
    const magi2norm::Grouping grouping = grouping_of(x, group_sizes, modality_ids, held);
    const auto norm = norm_for(weight, config_of(dim, eps, num_modality, 1));
    const Tensor g = dlogits.scalar_type() == ScalarType::Float ? dlogits : torch::stable::to(dlogits, ScalarType::Float);
    Tensor dx = new_tensor(x, {x.sizes().begin(), x.sizes().end()}, x.scalar_type());
    Tensor dweight = torch::stable::new_empty(weight, {weight.sizes().begin(), weight.sizes().end()}, weight.scalar_type());
    Tensor dphi = torch::stable::new_empty(phi, {phi.sizes().begin(), phi.sizes().end()}, ScalarType::Float);
    magi2norm::BackwardOptions options;
    options.dx_dtype = dtype_of(x.scalar_type(), "x");
    options.parallel_loop = torch_parallel_loop();
    options.num_threads = torch_num_threads();
    options.inverse_rms = view_of(inverse_rms, "inverse_rms");
    norm->mhc_logits_backward(view_of(x, "x"), grouping, view_of(phi, "phi"), view_of(g, "dlogits"), view_of(dx, "dx"),
                              view_of(dweight, "dweight"), view_of(dphi, "dphi"), options);
    return {dx, dweight, dphi};
} catch (const magi2norm::Error &e) {
    rethrow(e);
}

}  // namespace

}  // namespace magi2norm_torch

STABLE_TORCH_LIBRARY(magi2norm, m) {
    m.def("forward(Tensor x, Tensor weight, Tensor? group_sizes, Tensor? modality_ids, int dim, float eps, "
          "int num_modality, int num_patterns, int? out_dtype) -> (Tensor, Tensor)");
    m.def("normalize(Tensor x, Tensor weight, Tensor? group_sizes, Tensor? modality_ids, int dim, float eps, "
          "int num_modality, int num_patterns, int? out_dtype) -> Tensor");
    m.def("normalize_out(Tensor x, Tensor weight, Tensor? group_sizes, Tensor? modality_ids, int dim, float eps, "
          "int num_modality, int num_patterns, Tensor(a!) out) -> ()");
    m.def("backward(Tensor dy, Tensor x, Tensor weight, Tensor? inverse_rms, Tensor? group_sizes, "
          "Tensor? modality_ids, int dim, float eps, int num_modality, int num_patterns) -> (Tensor, Tensor)");
    m.def("mhc_logits(Tensor x, Tensor weight, Tensor phi, Tensor? group_sizes, Tensor? modality_ids, int dim, "
          "float eps, int num_modality) -> (Tensor, Tensor)");
    m.def("mhc_logits_backward(Tensor dlogits, Tensor x, Tensor weight, Tensor phi, Tensor inverse_rms, "
          "Tensor? group_sizes, Tensor? modality_ids, int dim, float eps, int num_modality) -> (Tensor, Tensor, Tensor)");
}

STABLE_TORCH_LIBRARY_IMPL(magi2norm, CPU, m) {
    m.impl("forward", TORCH_BOX(&magi2norm_torch::forward));
    m.impl("normalize", TORCH_BOX(&magi2norm_torch::normalize));
    m.impl("normalize_out", TORCH_BOX(&magi2norm_torch::normalize_out));
    m.impl("backward", TORCH_BOX(&magi2norm_torch::backward));
    m.impl("mhc_logits", TORCH_BOX(&magi2norm_torch::mhc_logits));
    m.impl("mhc_logits_backward", TORCH_BOX(&magi2norm_torch::mhc_logits_backward));
}

STABLE_TORCH_LIBRARY_IMPL(magi2norm, CUDA, m) {
    m.impl("forward", TORCH_BOX(&magi2norm_torch::forward));
    m.impl("normalize", TORCH_BOX(&magi2norm_torch::normalize));
    m.impl("normalize_out", TORCH_BOX(&magi2norm_torch::normalize_out));
    m.impl("backward", TORCH_BOX(&magi2norm_torch::backward));
}
