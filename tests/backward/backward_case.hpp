// One backward call described once: inputs made from a seed, the library's gradients in FP32 and
// in the requested dtypes, and the float64 oracle's, for the B1-B3 checks.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backward_oracle.hpp"
#include "magi2norm/magi2norm.hpp"
#include "random_values.hpp"
#include "reference/host_tensor.hpp"
#include "reference/safetensors_file.hpp"

namespace backward_test {

using magi2norm::DType;

enum class GroupingKind { none, sizes, ids };

struct Inputs {
    magi2norm::NormConfig config;
    ref::HostTensor x, dy, weight;
    GroupingKind grouping = GroupingKind::none;
    std::vector<std::int64_t> sizes;
    std::vector<std::int32_t> ids;  // per token (also for sizes: derived here)

    magi2norm::Grouping library_grouping() const;
    Problem problem() const;  // the oracle's view of the same values
};

// The oracle's view of a call: x and dy read through their views (any strides), the scale
// float32(W(w + 1)) from `weight`, per-token ids (empty: all modality 0).
Problem make_problem(const magi2norm::NormConfig &config, const ref::HostTensor &weight, const magi2norm::ConstTensorView &x,
                     const magi2norm::ConstTensorView &dy, const std::vector<std::int32_t> &ids);

// x [shape] in x_dtype, each row uniform in [-2^e, 2^e] for e in [-3, 3] (rows whose dx does not
// cancel: B1 measures the arithmetic, not an FP32 inverse RMS's conditioning), dy uniform in [-1, 1] over the
// output shape, weight uniform in [-1, 1]; M modalities (an empty one with sizes), P patterns.
Inputs make_inputs(DType x_dtype, DType dy_dtype, DType weight_dtype, const ref::Shape &shape, std::int64_t num_modality,
                   std::int64_t num_patterns, GroupingKind grouping, std::uint64_t seed);

// The inputs of a golden gradient file (../shared/golden_grad, SPEC.md's keys).
Inputs golden_inputs(const ref::SafetensorsFile &file);

struct Result {
    ref::HostTensor dx, dweight;
};
// The library's backward into fresh contiguous tensors.
Result run_backward(const Inputs &in, DType dx_dtype, DType dweight_dtype, const magi2norm::BackwardOptions &options = {});

// The forward of `in` on `backend` into a fresh tensor of `out_dtype`; with `inverse_rms`, into it
// each output row's inverse RMS too (CallOptions::inverse_rms).
ref::HostTensor run_forward(const Inputs &in, magi2norm::Backend backend, DType out_dtype, ref::HostTensor *inverse_rms);

// That an FP32 forward output of `in` is (x * inv) * scale with `inverse_rms` for inv, exactly,
// and each inv within 1e-6 (relative) of 1 / sqrt(float32(sum) / D + eps) with the sum in float64.
void expect_inverse_rms_of_output(const Inputs &in, const ref::HostTensor &out32, const ref::HostTensor &inverse_rms);

// B1 and B2 on the FP32 results of `in`, B3 on dx in `dx_dtype` and dweight in BF16 (an FP32 dx
// equal to the FP32 call's), each call with `options`.
void expect_b1_b2_b3(const Inputs &in, DType dx_dtype, const magi2norm::BackwardOptions &options = {});

// B1: |a - b| <= 1e-5 + 1e-5 |b| for every element (NaN equals NaN, infinities exactly); `worst`
// receives the largest |a - b| / (1e-5 + 1e-5 |b|).
testing::AssertionResult b1_close(const ref::HostTensor &dx32, const std::vector<double> &oracle, double *worst = nullptr);
// SPEC.md's revised B1: |a - b| <= 1e-5 + 1e-5 |b| + 2^-20 c, c the oracle's dx_terms.
testing::AssertionResult b1_close(const ref::HostTensor &dx32, const Gradients &oracle, double *worst = nullptr);
// B2: |a - b| <= 1e-5 (1 + bound) per dscale element.
testing::AssertionResult b2_close(const ref::HostTensor &dscale32, const std::vector<double> &oracle,
                                  const std::vector<double> &bound, double *worst = nullptr);
// B3: a BF16/FP16 result is the RNE cast of the call's own FP32 result, within one local ULP of the
// oracle's cast plus only what SPEC.md's B1 says no FP32 evaluation resolves, 2^-20 of the
// terms that cancel (`terms`: the oracle's dx_terms, or dscale_bound), negligible beside the ULP
// wherever the result does not cancel. No 1e-5 allowance. `beyond_one_ulp` counts the elements
// that needed it.
testing::AssertionResult b3_one_ulp(const ref::HostTensor &low, const ref::HostTensor &own32, const std::vector<double> &oracle,
                                    const std::vector<double> &terms, std::int64_t *beyond_one_ulp = nullptr);

}  // namespace backward_test
