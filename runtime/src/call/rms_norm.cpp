#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "../views/layout.hpp"
#include "../views/views.hpp"
#include "backward.hpp"
#include "call_plan.hpp"
#include "kernel_abi.h"
#include "magi2norm/float_codecs.hpp"
#include "mhc_logits.hpp"
#include "norm_state.hpp"

namespace magi2norm {

namespace {

bool valid_dtype(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; }

void check_config(const NormConfig &c) {
    if (c.dim < 1) throw Error(ErrorCode::config, "dim must be >= 1, got " + std::to_string(c.dim));
    if (c.num_modality < 1) throw Error(ErrorCode::config, "num_modality must be >= 1, got " + std::to_string(c.num_modality));
    if (c.num_patterns < 1) throw Error(ErrorCode::config, "num_patterns must be >= 1, got " + std::to_string(c.num_patterns));
    if (!(c.eps >= 0.0f) || !std::isfinite(c.eps)) {
        throw Error(ErrorCode::config, "eps must be finite and >= 0, got " + std::to_string(c.eps));
    }
    if (c.out_dtype && !valid_dtype(*c.out_dtype)) throw Error(ErrorCode::dtype, "config out_dtype is not f32, bf16 or f16");
    std::int64_t n;
    if (__builtin_mul_overflow(c.num_modality, c.num_patterns, &n) || __builtin_mul_overflow(n, c.dim, &n)) {
        throw Error(ErrorCode::overflow, "num_modality * num_patterns * dim overflows");
    }
    // The kernels index the scale with 32-bit extents and strides; refused here, before the
    // scale is allocated, rather than by every call.
    if (n > std::numeric_limits<std::int32_t>::max()) {
        throw Error(ErrorCode::overflow, "the scale would have more than 2^31 - 1 elements (num_modality * num_patterns * dim = " +
                                             std::to_string(n) + ")");
    }
}

std::int64_t weight_size(const NormConfig &c) { return c.num_modality * c.num_patterns * c.dim; }

// scale = float32(W(w + 1)): the +1 is taken in FP32 and rounded to the weight's dtype, as
// PyTorch does for a BF16/FP16 tensor plus a Python scalar.
float plus_one(DType weight_dtype, const unsigned char *element) {
    if (weight_dtype == DType::f32) {
        float w;
        std::memcpy(&w, element, sizeof w);
        return w + 1.0f;
    }
    std::uint16_t bits;
    std::memcpy(&bits, element, sizeof bits);
    if (weight_dtype == DType::bf16) return bf16_to_f32(f32_to_bf16(bf16_to_f32(bits) + 1.0f));
    return f16_to_f32(f32_to_f16(f16_to_f32(bits) + 1.0f));
}

// A NaN scale is stored as the one quiet NaN 0x7fc00000, whatever the weight's payload: the CPU
// kernels' BF16 encoder rounds the NaNs of a BF16 input's results without a NaN test, which is
// exact only for NaNs whose low 16 bits are clear (NanBits in generators/float_codecs.h).
float scale_of(DType weight_dtype, const unsigned char *element) {
    const float scale = plus_one(weight_dtype, element);
    return std::isnan(scale) ? std::numeric_limits<float>::quiet_NaN() : scale;
}

std::shared_ptr<const detail::NormState> make_state(const NormConfig &config, std::vector<float> scale) {
    auto state = std::make_shared<detail::NormState>();
    state->config = config;
    state->paired_scale = detail::paired_word_scale(scale, config.dim);
    state->scale = std::move(scale);
    return state;
}

// The norm a call runs; a moved-from norm runs none.
const detail::NormState &state_of(const std::shared_ptr<const detail::NormState> &state) {
    if (!state) throw Error(ErrorCode::config, "this norm has been moved from; give it a weight or assign a norm to it first");
    return *state;
}

}  // namespace

namespace detail {

std::vector<float> paired_word_scale(const std::vector<float> &scale, std::int64_t dim) {
    constexpr std::size_t block = abi::kSumLanes, half = block / 2;
    if (dim % abi::kSumLanes != 0) return {};
    std::vector<float> paired(scale.size());
    for (std::size_t start = 0; start < scale.size(); start += block) {
        for (std::size_t i = 0; i < half; ++i) {
            paired[start + i] = scale[start + 2 * i];
            paired[start + half + i] = scale[start + 2 * i + 1];
        }
    }
    return paired;
}

}  // namespace detail

RMSNorm::RMSNorm(const NormConfig &config) : config_(config) {
    check_config(config_);
    state_ = make_state(config_, std::vector<float>(static_cast<std::size_t>(weight_size(config_)), 1.0f));
}

RMSNorm::RMSNorm(const NormConfig &config, ConstTensorView weight) : config_(config) {
    check_config(config_);
    set_weight(weight);
}

void RMSNorm::set_weight(ConstTensorView weight) {
    const auto w = detail::check_view(weight.data, weight.dtype, weight.shape, weight.strides, "weight");
    if (w.count != weight_size(config_)) {
        throw Error(ErrorCode::weight, "weight has " + std::to_string(w.count) + " elements but num_modality * num_patterns * dim = " +
                                           std::to_string(weight_size(config_)));
    }
    const std::size_t elem = dtype_size(w.dtype);
    std::vector<unsigned char> packed(static_cast<std::size_t>(w.count) * elem);
    detail::copy_to_contiguous(w, w.data, packed.data());
    std::vector<float> scale(static_cast<std::size_t>(w.count));
    for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = scale_of(w.dtype, packed.data() + i * elem);
    state_ = make_state(config_, std::move(scale));
}

const std::vector<float> &RMSNorm::scale() const {
    static const std::vector<float> none;
    return state_ ? state_->scale : none;
}

std::vector<std::int64_t> RMSNorm::output_shape(const std::vector<std::int64_t> &input_shape) const {
    return detail::output_shape(config_, detail::Dims(input_shape, "input")).to_vector();
}

DType RMSNorm::output_dtype(DType input, std::optional<DType> out_dtype) const {
    return detail::output_dtype(config_, input, out_dtype);
}

void RMSNorm::forward(const ConstTensorView &x, const Grouping &grouping, const TensorView &out, std::optional<DType> out_dtype,
                      const Stream &stream) const {
    CallOptions options;
    options.out_dtype = out_dtype;
    options.stream = stream;
    forward(x, grouping, out, options);
}

void RMSNorm::forward(const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
                      const CallOptions &options) const {
    const detail::CallPlan plan = detail::plan_call(state_of(state_), x, grouping, out, options);
    detail::run_call(plan, x.data, out.data, grouping.token_ids());
}

Plan RMSNorm::plan(const ConstTensorView &x, const Grouping &grouping, const TensorView &out, const CallOptions &options) const {
    auto call = std::make_shared<detail::CallPlan>(detail::plan_call(state_of(state_), x, grouping, out, options));
    call->keep = state_;
    return Plan(std::move(call));
}

void RMSNorm::backward(const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping, const TensorView &dx,
                       const TensorView &dweight, const BackwardOptions &options) const {
    detail::run_backward(state_of(state_), x, dy, grouping, dx, dweight, options);
}

void RMSNorm::mhc_logits(const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi, const TensorView &logits,
                         const MhcLogitsOptions &options) const {
    detail::run_mhc_logits(state_of(state_), x, grouping, phi, logits, options);
}

void RMSNorm::mhc_logits_backward(const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi,
                                  const ConstTensorView &dlogits, const TensorView &dx, const TensorView &dweight, const TensorView &dphi,
                                  const BackwardOptions &options) const {
    detail::run_mhc_logits_backward(state_of(state_), x, grouping, phi, dlogits, dx, dweight, dphi, options);
}

const detail::NormState &detail::norm_state_of(const RMSNorm &norm) { return state_of(norm.state_); }

const detail::CallPlan &detail::call_plan_of(const Plan &plan) {
    if (!plan.call_) throw Error(ErrorCode::config, "this plan is empty: make it with RMSNorm::plan");
    return *plan.call_;
}

void Plan::run(const void *x, void *out) const {
    if (!call_) throw Error(ErrorCode::config, "this plan is empty: make it with RMSNorm::plan");
    if (call_->checks_ids) throw Error(ErrorCode::grouping, "this plan groups by modality ids: pass them to run");
    detail::run_call(*call_, x, out, nullptr);
}

void Plan::run(const void *x, void *out, const std::int32_t *token_ids) const {
    if (!call_) throw Error(ErrorCode::config, "this plan is empty: make it with RMSNorm::plan");
    detail::run_call(*call_, x, out, token_ids);
}

}  // namespace magi2norm
