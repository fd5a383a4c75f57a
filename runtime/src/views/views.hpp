// Checking tensor views (shape, strides, data, byte range) and copying between strided views.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dims.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::detail {

// "[2, 3, 4]", for a std::vector or a Dims.
template <typename Shape>
std::string shape_string(const Shape &shape) {
    std::string s = "[";
    for (auto it = shape.begin(); it != shape.end(); ++it) s += (it == shape.begin() ? "" : ", ") + std::to_string(*it);
    return s + "]";
}

// Product of the extents (1 for rank 0); throws Error(shape) for a negative extent and
// Error(overflow) past INT64_MAX.
template <typename Shape>
std::int64_t count_elements(const Shape &shape) {
    for (std::int64_t extent : shape) {
        if (extent < 0) throw Error(ErrorCode::shape, "negative extent " + std::to_string(extent));
    }
    // A zero extent anywhere makes the tensor empty, however large the other extents are.
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
    std::int64_t count = 1;
    for (std::int64_t extent : shape) {
        if (__builtin_mul_overflow(count, extent, &count)) {
            throw Error(ErrorCode::overflow, "shape has more elements than fit in int64");
        }
    }
    return count;
}

// Row-major strides of `shape` into `strides` (same size); throws Error(overflow) past INT64_MAX,
// except for an empty shape, whose strides address nothing and saturate instead.
template <typename Shape, typename Strides>
void row_major_strides(const Shape &shape, Strides &strides) {
    const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
    std::int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        if (shape[i] > 0 && __builtin_mul_overflow(stride, shape[i], &stride)) {
            if (!empty) throw Error(ErrorCode::overflow, "shape has more elements than fit in int64");
            stride = INT64_MAX;
        }
    }
}

// A view whose geometry has been checked: strides resolved (row-major when none were given;
// 0 on axes of extent 1 and on every axis of an empty view, which address nothing), element count, and the bytes its elements touch, [lo_bytes, hi_bytes) from its element 0
// (both 0 for 0 elements). `data` is set by check_view, null after check_geometry.
struct CheckedView {
    const void *data = nullptr;
    DType dtype = DType::f32;
    Dims shape;
    Dims strides;
    std::int64_t count = 0;
    std::int64_t lo_bytes = 0, hi_bytes = 0;
};

inline bool has_negative_stride(const CheckedView &v) {
    return std::any_of(v.strides.begin(), v.strides.end(), [](std::int64_t s) { return s < 0; });
}

// Fills `view` (its data left null); throws Error naming `what` ("input", "output", "weight",
// ...) for: an unknown dtype, a rank above kMaxRank, strides of the wrong length, a negative
// extent, an element count or a byte offset that overflows. Reads no data pointer; allocates
// nothing.
void check_geometry(CheckedView &view, DType dtype, const std::vector<std::int64_t> &shape,
                    const std::vector<std::int64_t> &strides, const char *what);

// The addresses [lo, hi) that a checked view's elements take at `data`; throws Error(null_data)
// for a null `data` of a non-empty view and Error(overflow) past the address space. Empty views
// take none ({0, 0}).
struct AddressRange {
    std::uintptr_t lo = 0, hi = 0;
};
enum class AddressProblem { null_data, overflow };
[[noreturn]] void throw_address_error(AddressProblem problem, const char *what);
// Inline: a call's pointer checks run on every call of a plan, and an out-of-line return of the
// pair cost a stalled store-to-load forward in each caller.
inline AddressRange address_range(const CheckedView &v, const void *data, const char *what) {
    if (v.count == 0) return {};
    if (data == nullptr) throw_address_error(AddressProblem::null_data, what);
    const auto base = reinterpret_cast<std::uintptr_t>(data);
    // The negation in unsigned arithmetic: lo_bytes may be INT64_MIN, whose negation int64 lacks.
    if ((v.lo_bytes < 0 && base < std::uintptr_t{0} - static_cast<std::uintptr_t>(v.lo_bytes)) ||
        (v.hi_bytes > 0 && UINTPTR_MAX - base < static_cast<std::uintptr_t>(v.hi_bytes))) {
        throw_address_error(AddressProblem::overflow, what);
    }
    // Modular arithmetic handles lo_bytes < 0.
    return {base + static_cast<std::uintptr_t>(v.lo_bytes), base + static_cast<std::uintptr_t>(v.hi_bytes)};
}

// check_geometry, then address_range at `data`: a view whose data is read now.
CheckedView check_view(const void *data, DType dtype, const std::vector<std::int64_t> &shape,
                       const std::vector<std::int64_t> &strides, const char *what);

// Copies every element of `src` into the element of `dst` at the same index (same shape and
// element size; strides may differ).
void copy_elements(const CheckedView &src, void *dst, const Dims &dst_strides);

// Row-major strides of a view's shape.
Dims contiguous_dims(const Dims &shape);

// The elements of view `v` with its data at `data`, row-major and contiguous at `to`; and back:
// the contiguous elements at `from` into `v`'s layout at `data`.
void copy_to_contiguous(const CheckedView &v, const void *data, void *to);
void copy_from_contiguous(const void *from, const CheckedView &v, void *data);

}  // namespace magi2norm::detail
