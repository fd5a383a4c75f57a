#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "device_scales.hpp"
#include "float_bits.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "opencl_context.hpp"
#include "views.hpp"

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
    if (weight_dtype == DType::bf16) return detail::bf16_to_f32(detail::f32_to_bf16(detail::bf16_to_f32(bits) + 1.0f));
    return detail::f16_to_f32(detail::f32_to_f16(detail::f16_to_f32(bits) + 1.0f));
}

// A NaN scale is stored as the one quiet NaN 0x7fc00000, whatever the weight's payload: the CPU
// kernels' BF16 encoder rounds the NaNs of a BF16 input's results without a NaN test, which is
// exact only for NaNs whose low 16 bits are clear (NanBits in generators/float_codecs.h).
float scale_of(DType weight_dtype, const unsigned char *element) {
    const float scale = plus_one(weight_dtype, element);
    return std::isnan(scale) ? std::numeric_limits<float>::quiet_NaN() : scale;
}

// Checks a grouping by sizes (M sizes, each >= 0, summing to the token count) and hands each
// modality's tokens to `group(m, first, size)`, m = 0 .. M-1, in order.
template <typename Group>
void walk_group_sizes(const NormConfig &config, const Grouping &grouping, std::int64_t tokens, Group &&group) {
    const auto &sizes = grouping.group_sizes();
    if (static_cast<std::int64_t>(sizes.size()) != config.num_modality) {
        throw Error(ErrorCode::grouping, "got " + std::to_string(sizes.size()) + " group sizes for num_modality " +
                                             std::to_string(config.num_modality));
    }
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        if (sizes[m] < 0) {
            throw Error(ErrorCode::grouping, "group size " + std::to_string(m) + " is negative (" + std::to_string(sizes[m]) + ")");
        }
    }
    std::int64_t first = 0;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        if (sizes[m] > tokens - first) {
            throw Error(ErrorCode::grouping, "group sizes sum past the token count " + std::to_string(tokens));
        }
        group(m, first, sizes[m]);
        first += sizes[m];
    }
    if (first != tokens) {
        throw Error(ErrorCode::grouping, "group sizes sum to " + std::to_string(first) + " but the input has " +
                                             std::to_string(tokens) + " tokens");
    }
}

bool has_negative_stride(const detail::CheckedView &v) {
    for (std::int64_t s : v.strides) {
        if (s < 0) return true;
    }
    return false;
}

// The bytes a view or the ids touch: [lo, hi) of `root`, an OpenCL buffer, or of the address
// space (root null). Empty spans overlap nothing.
struct ByteSpan {
    const void *root;
    std::uint64_t lo, hi;
};

bool overlap(const ByteSpan &a, const ByteSpan &b) { return a.root == b.root && a.lo < b.hi && b.lo < a.hi; }

// The span of `bytes` from `data`. An OpenCL buffer's handle starts at its first byte and must
// hold them all (OpenCL checks nothing when the kernel runs): else Error(`code`), "`what`
// <bytes> bytes but the OpenCL buffer holds <size>". Nothing is looked up for 0 bytes (an empty
// view's handle may be null).
ByteSpan span_of(const void *data, std::uint64_t bytes, bool cl_buffer, ErrorCode code, const std::string &what) {
    if (bytes == 0) return {nullptr, 0, 0};
    if (!cl_buffer) {
        const std::uint64_t lo = reinterpret_cast<std::uintptr_t>(data);
        return {nullptr, lo, lo + bytes};
    }
    const auto extent = detail::opencl_extent(data);
    if (bytes > extent.size) {
        throw Error(code, what + " " + std::to_string(bytes) + " bytes but the OpenCL buffer holds " + std::to_string(extent.size));
    }
    return {extent.root, extent.offset, extent.offset + bytes};
}

// The span of a checked view: its byte range in the address space, or, for a view of an OpenCL
// buffer (strides >= 0, so it spans [0, hi - lo) of its buffer), that range checked against the
// buffer.
ByteSpan span_of(const detail::CheckedView &v, bool cl_buffer, const char *what) {
    if (!cl_buffer) return {nullptr, v.lo, v.hi};
    return span_of(v.data, v.count == 0 ? 0 : v.hi - v.lo, true, ErrorCode::shape, std::string(what) + " view needs");
}

// Per-token ids, in any memory: their count and pointer, then their place (apart from the output),
// then their values where the host can read them (device ids are clamped to [0, M) by the kernel).
void check_ids(const NormConfig &config, const Grouping &grouping, std::int64_t tokens, const detail::CheckedView &out,
               bool cl_buffers) {
    if (grouping.num_tokens() != tokens) {
        throw Error(ErrorCode::grouping, "got " + std::to_string(grouping.num_tokens()) + " modality ids for " +
                                             std::to_string(tokens) + " tokens");
    }
    if (tokens == 0) return;
    if (grouping.token_ids() == nullptr) throw Error(ErrorCode::null_data, "modality ids pointer is null");
    // The kernel writes the output while it reads the ids: they must not share bytes.
    const ByteSpan ids = span_of(grouping.token_ids(), static_cast<std::uint64_t>(tokens) * sizeof(std::int32_t), cl_buffers,
                                 ErrorCode::grouping, "modality ids for " + std::to_string(tokens) + " tokens need");
    if (overlap(ids, span_of(out, cl_buffers, "output"))) {
        throw Error(ErrorCode::overlap, "modality ids and output memory overlap (the kernel would overwrite ids it reads)");
    }
    if (grouping.ids_memory() != Memory::host) return;
    for (std::int64_t t = 0; t < tokens; ++t) {
        const std::int32_t id = grouping.token_ids()[t];
        if (id < 0 || id >= config.num_modality) {
            throw Error(ErrorCode::modality_id, "token " + std::to_string(t) + " has modality id " + std::to_string(id) +
                                                    ", outside [0, " + std::to_string(config.num_modality) + ")");
        }
    }
}

}  // namespace

// A copy of a moved-from norm is moved-from too (no device scales): its calls are refused.
RMSNorm::RMSNorm(const RMSNorm &other)
    : config_(other.config_), scale_(other.scale_), paired_scale_(other.paired_scale_),
      device_scales_(other.device_scales_ ? std::make_unique<DeviceScales>() : nullptr) {}

RMSNorm &RMSNorm::operator=(const RMSNorm &other) {
    // Copied first, then moved in: if the copy throws, this norm keeps its own config and scale.
    if (this != &other) *this = RMSNorm(other);
    return *this;
}

RMSNorm::RMSNorm(RMSNorm &&) noexcept = default;
RMSNorm &RMSNorm::operator=(RMSNorm &&) noexcept = default;
RMSNorm::~RMSNorm() = default;

RMSNorm::RMSNorm(const NormConfig &config) : config_(config), device_scales_(std::make_unique<DeviceScales>()) {
    check_config(config_);
    scale_.assign(static_cast<std::size_t>(weight_size(config_)), 1.0f);
    paired_scale_ = detail::paired_word_scale(scale_, config_.dim);
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
    detail::copy_elements(w, packed.data(), detail::contiguous_dims(w.shape));
    std::vector<float> scale(static_cast<std::size_t>(w.count));
    for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = scale_of(w.dtype, packed.data() + i * elem);
    std::vector<float> paired = detail::paired_word_scale(scale, config_.dim);
    scale_ = std::move(scale);
    paired_scale_ = std::move(paired);
    device_scales_ = std::make_unique<DeviceScales>();
}

std::vector<std::int64_t> RMSNorm::output_shape(const std::vector<std::int64_t> &input_shape) const {
    return detail::output_shape(config_, detail::Dims(input_shape, "input")).to_vector();
}

DType RMSNorm::output_dtype(DType input, std::optional<DType> out_dtype) const {
    const DType d = out_dtype ? *out_dtype : config_.out_dtype ? *config_.out_dtype : input;
    if (!valid_dtype(d)) throw Error(ErrorCode::dtype, "output dtype is not f32, bf16 or f16");
    return d;
}

void RMSNorm::forward(const ConstTensorView &x, const Grouping &grouping, const TensorView &out, std::optional<DType> out_dtype,
                      const Stream &stream) const {
    // Everything is checked before the kernel runs: a refused call writes nothing.
    if (!device_scales_) throw Error(ErrorCode::config, "this norm has been moved from; give it a weight or assign a norm to it first");
    const auto xv = detail::check_view(x.data, x.dtype, x.shape, x.strides, "input");
    const auto ov = detail::check_view(out.data, out.dtype, out.shape, out.strides, "output");
    const DType want = output_dtype(x.dtype, out_dtype);
    if (ov.dtype != want) {
        throw Error(ErrorCode::dtype, std::string("output dtype is ") + dtype_name(ov.dtype) + " but the call produces " +
                                          dtype_name(want));
    }
    detail::KernelCall call;
    call.layout = detail::plan_layout(config_, xv, ov);
    detail::check_no_self_alias(ov, "output");
    call.backend = stream.backend ? *stream.backend : default_backend();
    call.memory = x.memory;
    // Where the memory is comes first: the overlap test below depends on what a pointer is.
    const bool by_ids = grouping.kind() == Grouping::Kind::ids;
    if (x.memory != out.memory || (by_ids && grouping.ids_memory() != x.memory)) {
        throw Error(ErrorCode::device, "input, output and modality ids must all be in host memory or all in device memory");
    }
    if (call.memory == Memory::device && call.backend == Backend::cpu) {
        throw Error(ErrorCode::device, "device-memory views need the cuda or opencl backend, not cpu");
    }
    // A cl_mem is a handle, not an address: views of OpenCL buffers start at the buffer's first
    // byte, so two views overlap exactly when they name the same buffer.
    const bool cl_buffers = call.memory == Memory::device && call.backend == Backend::opencl;
    if (cl_buffers) {
        if (stream.stream == nullptr) {
            throw Error(ErrorCode::device, "views of OpenCL buffers need the host's command queue (Stream::stream)");
        }
        if (has_negative_stride(xv) || has_negative_stride(ov)) {
            throw Error(ErrorCode::stride, "views of OpenCL buffers start at the buffer's first byte, so their strides must be >= 0");
        }
        // OpenCL checks nothing of this when the kernel runs: each view must fit in its cl_mem,
        // and input and output must not share bytes, sub-buffers of one parent included.
        if (overlap(span_of(xv, true, "input"), span_of(ov, true, "output"))) {
            throw Error(ErrorCode::overlap, "input and output overlap in the same OpenCL buffer (in-place calls are not supported)");
        }
    } else {
        detail::check_disjoint(xv, ov);
    }

    const std::int64_t tokens = call.layout.extent[3];
    if (!call.layout.has_token_axis) {
        if (config_.num_modality > 1) {
            throw Error(ErrorCode::grouping, "num_modality > 1 needs a token axis separate from the pattern axis; the input " +
                                                 detail::shape_string(xv.shape) + " has none");
        }
        if (grouping.kind() != Grouping::Kind::none) {
            throw Error(ErrorCode::grouping, "grouping needs a token axis; the input " + detail::shape_string(xv.shape) + " has none");
        }
    }
    if (config_.num_modality > 1 && grouping.kind() == Grouping::Kind::none) {
        throw Error(ErrorCode::grouping, "num_modality is " + std::to_string(config_.num_modality) +
                                             " but no grouping (group sizes or modality ids) was given");
    }
    if (by_ids) check_ids(config_, grouping, tokens, ov, cl_buffers);

    // Grouping by sizes reaches the kernel as up to kMaxGroups - 1 scalar group starts; more
    // modalities than that (host memory only) go as per-token ids made here, 4 bytes a token.
    call.group_starts.fill(std::numeric_limits<std::int32_t>::max());
    std::vector<std::int32_t> ids_from_sizes;
    if (grouping.kind() == Grouping::Kind::sizes) {
        const bool as_starts = config_.num_modality <= detail::kMaxGroups;
        if (!as_starts && call.memory == Memory::device) {
            throw Error(ErrorCode::grouping, "with device memory, grouping by sizes supports up to " +
                                                 std::to_string(detail::kMaxGroups) + " modalities (num_modality is " +
                                                 std::to_string(config_.num_modality) + "); pass per-token ids");
        }
        if (!as_starts) ids_from_sizes.resize(static_cast<std::size_t>(tokens));
        walk_group_sizes(config_, grouping, tokens, [&](std::size_t m, std::int64_t first, std::int64_t size) {
            if (!as_starts) {
                std::fill_n(ids_from_sizes.begin() + first, size, static_cast<std::int32_t>(m));
            } else if (m > 0) {
                call.group_starts[m - 1] = static_cast<std::int32_t>(first);
            }
        });
    }
    if (ov.count == 0) return;
    // One modality: every token reads the same scale (the kernel clamps any id to 0), so ids are
    // not passed and the rows may regroup into more tokens.
    const bool one_modality = config_.num_modality == 1;
    if (one_modality) detail::fold_rows(call.layout, static_cast<std::int64_t>(dtype_size(xv.dtype)), config_.num_patterns > 1);

    // Halide's host-to-device copies need non-negative strides: a GPU call on host views with a
    // negative stride goes through contiguous copies (staging copies anyway).
    if (call.backend != Backend::cpu && call.memory == Memory::host && (has_negative_stride(xv) || has_negative_stride(ov))) {
        std::vector<unsigned char> x_copy(static_cast<std::size_t>(xv.count) * dtype_size(xv.dtype));
        std::vector<unsigned char> out_copy(static_cast<std::size_t>(ov.count) * dtype_size(ov.dtype));
        detail::copy_elements(xv, x_copy.data(), detail::contiguous_dims(xv.shape));
        forward(ConstTensorView(x_copy.data(), xv.dtype, xv.shape.to_vector()), grouping,
                TensorView(out_copy.data(), ov.dtype, ov.shape.to_vector()), want, stream);
        const auto result = detail::check_view(out_copy.data(), ov.dtype, ov.shape.to_vector(), {}, "output");
        detail::copy_elements(result, out.data, ov.strides);
        return;
    }

    call.x = xv.data;
    call.in_dtype = xv.dtype;
    call.out = out.data;
    call.out_dtype = want;
    static const std::int32_t kZeroId = 0;
    call.scale = scale_.data();
    call.paired_scale = paired_scale_.empty() ? nullptr : paired_scale_.data();
    call.zero_id = &kZeroId;
    if (call.memory == Memory::device) {
        call.gpu_context = cl_buffers ? (stream.context ? stream.context : detail::opencl_queue_context(stream.stream))
                                      : detail::resolve_cuda_context(stream.context);
        call.gpu_stream = stream.stream;
        const auto device = device_scales_->get(scale_, call.backend, call.gpu_context, call.gpu_stream);
        call.scale = device.scale;
        call.zero_id = device.zero_id;
    }
    call.dim = config_.dim;
    call.num_patterns = config_.num_patterns;
    call.num_modality = config_.num_modality;
    call.token_ids = by_ids && !one_modality ? grouping.token_ids() : ids_from_sizes.empty() ? nullptr : ids_from_sizes.data();
    call.eps = config_.eps;
    detail::run_kernel(call);
}

}  // namespace magi2norm
