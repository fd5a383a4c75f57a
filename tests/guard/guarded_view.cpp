#include "guarded_view.hpp"

#include <cstring>

namespace guard {

void byte_range(const ref::Shape &shape, const ref::Shape &strides, ref::DType dtype, std::int64_t &lo, std::int64_t &hi) {
    lo = 0;
    hi = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) (strides[i] < 0 ? lo : hi) += strides[i] * (shape[i] - 1);
    const auto size = static_cast<std::int64_t>(ref::element_size(dtype));
    lo *= size;
    hi *= size;
}

GuardedView::GuardedView(const ref::HostTensor &values, const ref::Shape &strides_or_empty, Side side)
    : strides(strides_or_empty.empty() ? ref::row_major_strides(values.shape()) : strides_or_empty) {
    std::int64_t lo = 0, hi = 0;
    byte_range(values.shape(), strides, values.dtype(), lo, hi);
    memory = std::make_unique<GuardedMemory>(lo, hi, side);
    const auto size = static_cast<std::int64_t>(ref::element_size(values.dtype()));
    ref::for_each_offset_pair(values.shape(), strides, ref::row_major_strides(values.shape()),
                              [&](std::int64_t, std::int64_t at, std::int64_t from) {
                                  std::memcpy(memory->element0() + at * size, static_cast<const unsigned char *>(values.data()) + from * size,
                                              static_cast<std::size_t>(size));
                              });
    view = magi2norm::TensorView(memory->element0(), values.dtype(), values.shape(), strides);
}

}  // namespace guard
