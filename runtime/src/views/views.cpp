#include "views.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

namespace magi2norm::detail {

Dims contiguous_dims(const Dims &shape) {
    Dims strides(shape.size(), 0);
    row_major_strides(shape, strides);
    return strides;
}

void check_geometry(CheckedView &v, DType dtype, const std::vector<std::int64_t> &shape,
                    const std::vector<std::int64_t> &strides, const char *what) {
    if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16) {
        throw Error(ErrorCode::dtype, std::string(what) + " has an unknown dtype (" +
                                          std::to_string(static_cast<int>(dtype)) + ")");
    }
    v.data = nullptr;
    v.shape = Dims(shape, what);
    if (!strides.empty() && strides.size() != shape.size()) {
        throw Error(ErrorCode::stride, std::string(what) + " has " + std::to_string(strides.size()) +
                                           " strides for a shape of rank " + std::to_string(shape.size()));
    }
    for (std::int64_t extent : shape) {
        if (extent < 0) throw Error(ErrorCode::shape, std::string(what) + " shape " + shape_string(shape) + " has a negative extent");
    }
    v.dtype = dtype;
    v.count = count_elements(v.shape);
    v.strides = strides.empty() ? contiguous_dims(v.shape) : Dims(strides, what);
    v.lo_bytes = v.hi_bytes = 0;
    // An axis of extent 1 never steps, and an empty view addresses nothing: their strides are
    // held as 0, so that no later check (overflow, alignment, contiguity, overlap) sees them.
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
        if (v.count == 0 || v.shape[i] == 1) v.strides[i] = 0;
    }
    if (v.count == 0) return;

    // Lowest and highest element offsets, then bytes; every step checked for overflow.
    std::int64_t lo = 0, hi = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        std::int64_t span;
        if (__builtin_mul_overflow(shape[i] - 1, v.strides[i], &span) ||
            __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi)) {
            throw Error(ErrorCode::overflow, std::string(what) + " strides reach past the addressable range");
        }
    }
    const auto elem = static_cast<std::int64_t>(dtype_size(dtype));
    if (__builtin_mul_overflow(lo, elem, &v.lo_bytes) || __builtin_mul_overflow(hi + 1, elem, &v.hi_bytes)) {
        throw Error(ErrorCode::overflow, std::string(what) + " byte offsets overflow");
    }
}

void throw_address_error(AddressProblem problem, const char *what) {
    if (problem == AddressProblem::null_data) throw Error(ErrorCode::null_data, std::string(what) + " data pointer is null");
    throw Error(ErrorCode::overflow, std::string(what) + " spans past the end of the address space");
}

CheckedView check_view(const void *data, DType dtype, const std::vector<std::int64_t> &shape,
                       const std::vector<std::int64_t> &strides, const char *what) {
    CheckedView v;
    check_geometry(v, dtype, shape, strides, what);
    address_range(v, data, what);
    v.data = data;
    return v;
}

void copy_to_contiguous(const CheckedView &v, const void *data, void *to) {
    CheckedView source = v;
    source.data = data;
    copy_elements(source, to, contiguous_dims(v.shape));
}

void copy_from_contiguous(const void *from, const CheckedView &v, void *data) {
    CheckedView source = v;
    source.data = from;
    source.strides = contiguous_dims(v.shape);
    copy_elements(source, data, v.strides);
}

void copy_elements(const CheckedView &src, void *dst, const Dims &dst_strides) {
    if (src.count == 0) return;
    const auto elem = static_cast<std::int64_t>(dtype_size(src.dtype));
    // A rank-0 view is one element: treat it as shape [1].
    const bool scalar = src.shape.empty();
    const Dims shape = scalar ? Dims(1, 1) : src.shape;
    const Dims ss = scalar ? Dims(1, 1) : src.strides;
    const Dims ds = scalar ? Dims(1, 1) : dst_strides;
    const std::size_t rank = shape.size();
    // Unit inner strides on both sides: the innermost axis is one memcpy per outer index.
    const bool inner_run = ss[rank - 1] == 1 && ds[rank - 1] == 1;
    const std::int64_t run = inner_run ? shape[rank - 1] : 1;
    const std::size_t outer_rank = inner_run ? rank - 1 : rank;
    std::array<std::int64_t, kMaxRank> index{};
    const auto *s = static_cast<const char *>(src.data);
    auto *d = static_cast<char *>(dst);
    for (std::int64_t n = 0; n < src.count / run; ++n) {
        std::int64_t so = 0, doff = 0;
        for (std::size_t i = 0; i < outer_rank; ++i) {
            so += index[i] * ss[i];
            doff += index[i] * ds[i];
        }
        std::memcpy(d + doff * elem, s + so * elem, static_cast<std::size_t>(run * elem));
        for (std::size_t i = outer_rank; i-- > 0;) {
            if (++index[i] < shape[i]) break;
            index[i] = 0;
        }
    }
}

}  // namespace magi2norm::detail
