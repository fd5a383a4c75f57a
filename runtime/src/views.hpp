// Checking tensor views (shape, strides, data, byte range) and copying between strided views.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::detail {

// "[2, 3, 4]"
std::string shape_string(const std::vector<std::int64_t> &shape);

// A view whose geometry has been checked: strides resolved (row-major when none were given),
// element count and the byte range [lo, hi) that its elements touch (empty for 0 elements).
struct CheckedView {
    const void *data = nullptr;
    DType dtype = DType::f32;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    std::int64_t count = 0;
    std::uintptr_t lo = 0, hi = 0;
};

// Throws Error naming `what` ("input", "output", "weight", ...) for: an unknown dtype, strides
// of the wrong length, a negative extent, null data for a non-empty view, an element count or a
// byte offset that overflows.
CheckedView check_view(const void *data, DType dtype, const std::vector<std::int64_t> &shape,
                       const std::vector<std::int64_t> &strides, const char *what);

// For a view that is written: throws Error(stride) if two of its elements share memory.
void check_no_self_alias(const CheckedView &view, const char *what);

// Throws Error(overlap) if the byte ranges of `in` and `out` intersect.
void check_disjoint(const CheckedView &in, const CheckedView &out);

// Copies every element of `src` into the element of `dst` at the same index (same shape and
// element size; strides may differ).
void copy_elements(const CheckedView &src, void *dst, const std::vector<std::int64_t> &dst_strides);

}  // namespace magi2norm::detail
