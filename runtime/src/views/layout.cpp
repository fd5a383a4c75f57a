#include "layout.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "magi2norm_build_knobs.hpp"

namespace magi2norm::detail {

namespace {

constexpr int kD = 0, kH = 1, kA = 2, kT = 3;

// The kernel axis of output axis `i` for an output of rank `rank`. With P > 1 the second-to-last
// axis is the pattern axis; for rank 2 that is axis 0, so there is no token axis.
int kernel_axis(std::size_t rank, std::size_t i, bool patterned) {
    static const int maps[4][4] = {{kD}, {kT, kD}, {kT, kH, kD}, {kT, kA, kH, kD}};
    if (patterned && rank == 2 && i == 0) return kH;
    return maps[rank - 1][i];
}

void check_rank_and_dim(const NormConfig &config, const Dims &shape) {
    if (shape.empty() || shape.size() > 4) {
        throw Error(ErrorCode::shape, "input must have rank 1 to 4, got shape " + shape_string(shape));
    }
    for (const std::int64_t extent : shape) {
        if (extent < 0) throw Error(ErrorCode::shape, "negative extent " + std::to_string(extent) + " in shape " + shape_string(shape));
    }
    if (shape.back() != config.dim) {
        throw Error(ErrorCode::shape, "input last dim is " + std::to_string(shape.back()) + " but the norm's dim is " +
                                          std::to_string(config.dim) + " (shape " + shape_string(shape) + ")");
    }
}


// Whether the kernel axes `inner` and `outer` walk as one axis of `inner`'s strides.
bool mergeable(const KernelLayout &l, int inner, int outer) {
    return l.extent[outer] == 1 || (l.x_stride[outer] == l.x_stride[inner] * l.extent[inner] &&
                                    l.out_stride[outer] == l.out_stride[inner] * l.extent[inner] &&
                                    l.inv_stride[outer] == l.inv_stride[inner] * l.extent[inner]);
}

// Folds kernel axis `inner` into the token axis; the extents stay within int32 (the kernel's).
bool fold_into_tokens(KernelLayout &l, int inner) {
    if (l.extent[inner] == 1 || !mergeable(l, inner, kT)) return false;
    if (l.extent[inner] * l.extent[kT] > std::numeric_limits<std::int32_t>::max()) return false;
    l.extent[kT] *= l.extent[inner];
    l.x_stride[kT] = l.x_stride[inner];
    l.out_stride[kT] = l.out_stride[inner];
    l.inv_stride[kT] = l.inv_stride[inner];
    l.extent[inner] = 1;
    return true;
}

}  // namespace

void check_int32_axes(const CheckedView &v, const char *what) {
    constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
        if (v.shape[i] > kMax || std::llabs(v.strides[i]) > kMax) {
            throw Error(ErrorCode::overflow, std::string(what) + " " + shape_string(v.shape) + " has " +
                                                 (v.shape[i] > kMax ? "extent " + std::to_string(v.shape[i])
                                                                    : "stride " + std::to_string(v.strides[i])) +
                                                 " on axis " + std::to_string(i) +
                                                 ": the kernels take extents and strides up to 2^31 - 1 elements");
        }
    }
}

void fold_rows(KernelLayout &layout, std::int64_t in_bytes, bool patterned, std::int64_t chunk_bytes) {
    fold_into_tokens(layout, kA);
    if (patterned || layout.extent[kA] != 1) return;
    const std::int64_t row_bytes = layout.extent[kD] * in_bytes;
    if (row_bytes * layout.extent[kH] > knobs::fold_token_bytes && !fold_into_tokens(layout, kH) &&
        layout.extent[kH] > layout.extent[kT]) {
        // Rows whose strides do not chain (token-major [T, H, D] memory read as [H, T, D]: t
        // steps over D elements, h over H D): the longer axis becomes the tokens.
        std::swap(layout.extent[kH], layout.extent[kT]);
        std::swap(layout.x_stride[kH], layout.x_stride[kT]);
        std::swap(layout.out_stride[kH], layout.out_stride[kT]);
        std::swap(layout.inv_stride[kH], layout.inv_stride[kT]);
    }
    if (layout.extent[kH] != 1 || row_bytes > knobs::short_row_bytes) return;
    // One short row per token: tokens of k rows, the most that fit in a chunk and divide the rows
    // evenly, so that their sums come together.
    constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
    for (std::int64_t k = std::min(chunk_bytes / std::max<std::int64_t>(row_bytes, 1), layout.extent[kT]); k >= 2; --k) {
        if (layout.extent[kT] % k != 0 || std::llabs(layout.x_stride[kT]) * k > kMax || std::llabs(layout.out_stride[kT]) * k > kMax ||
            std::llabs(layout.inv_stride[kT]) * k > kMax) {
            continue;
        }
        layout.extent[kH] = k;
        layout.x_stride[kH] = layout.x_stride[kT];
        layout.out_stride[kH] = layout.out_stride[kT];
        layout.inv_stride[kH] = layout.inv_stride[kT];
        layout.extent[kT] /= k;
        layout.x_stride[kT] *= k;
        layout.out_stride[kT] *= k;
        layout.inv_stride[kT] *= k;
        return;
    }
}

void plan_inverse_rms(KernelLayout &layout, const NormConfig &config, const CheckedView &out, const CheckedView &inv) {
    if (inv.dtype != DType::f32) {
        throw Error(ErrorCode::dtype, std::string("the inverse RMS must be f32, got ") + dtype_name(inv.dtype));
    }
    Dims rows = out.shape;
    rows.pop_back();
    if (inv.shape != rows) {
        throw Error(ErrorCode::shape, "the inverse RMS has shape " + shape_string(inv.shape) + " but the output " +
                                          shape_string(out.shape) + " has rows " + shape_string(rows));
    }
    check_int32_axes(inv, "inverse RMS");
    const bool patterned = config.num_patterns > 1;
    for (std::size_t i = 0; i < inv.shape.size(); ++i) layout.inv_stride[kernel_axis(out.shape.size(), i, patterned)] = inv.strides[i];
}

DType output_dtype(const NormConfig &config, DType input, std::optional<DType> override_dtype) {
    const DType d = override_dtype ? *override_dtype : config.out_dtype ? *config.out_dtype : input;
    if (d != DType::f32 && d != DType::bf16 && d != DType::f16) throw Error(ErrorCode::dtype, "output dtype is not f32, bf16 or f16");
    return d;
}

Dims output_shape(const NormConfig &config, const Dims &input_shape) {
    check_rank_and_dim(config, input_shape);
    Dims shape = input_shape;
    if (config.num_patterns == 1) return shape;
    // A [P, D] scale: NumPy broadcasting of the trailing two axes.
    if (shape.size() == 1) shape.push_front(1);
    std::int64_t &patterns = shape[shape.size() - 2];
    if (patterns != 1 && patterns != config.num_patterns) {
        throw Error(ErrorCode::shape, "input shape " + shape_string(input_shape) + " does not broadcast with the [" +
                                          std::to_string(config.num_patterns) + ", " + std::to_string(config.dim) +
                                          "] scale: axis " + std::to_string(shape.size() - 2) + " must be 1 or " +
                                          std::to_string(config.num_patterns));
    }
    patterns = config.num_patterns;
    return shape;
}

KernelLayout plan_layout(const NormConfig &config, const CheckedView &x, const CheckedView &out) {
    const Dims expected = output_shape(config, x.shape);
    if (out.shape != expected) {
        throw Error(ErrorCode::shape, "output shape is " + shape_string(out.shape) + " but input " +
                                          shape_string(x.shape) + " gives " + shape_string(expected));
    }
    check_int32_axes(x, "input");
    check_int32_axes(out, "output");
    KernelLayout layout;
    layout.extent = {1, 1, 1, 1};
    const bool patterned = config.num_patterns > 1;
    const std::size_t rank = out.shape.size();
    for (std::size_t i = 0; i < rank; ++i) {
        const int axis = kernel_axis(rank, i, patterned);
        layout.extent[axis] = out.shape[i];
        layout.out_stride[axis] = out.strides[i];
    }
    // Input axes right-aligned with the output's (a rank-1 input under a [P, D] scale gains one).
    const std::size_t shift = rank - x.shape.size();
    for (std::size_t i = 0; i < x.shape.size(); ++i) {
        const int axis = kernel_axis(rank, i + shift, patterned);
        // An extent-1 axis (stride 0, check_geometry) against a larger output extent is broadcast.
        layout.x_stride[axis] = x.strides[i];
    }
    layout.has_token_axis = !(rank == 1 || (patterned && rank == 2));
    layout.scale_h_stride = patterned ? config.dim : 0;
    // A row of one element never steps along d: unit strides give it the dense path.
    if (layout.extent[kD] == 1) layout.x_stride[kD] = layout.out_stride[kD] = 1;
    return layout;
}

}  // namespace magi2norm::detail
