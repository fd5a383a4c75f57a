#include "strided_memory.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace backward_test {

std::string Layout::describe() const {
    std::string s = transposed ? "transposed" : "row-major";
    if (inner_step != 1) s += ", step " + std::to_string(inner_step);
    if (row_padding != 0) s += ", padded " + std::to_string(row_padding);
    for (std::size_t a = 0; a < reversed.size(); ++a) {
        if (reversed[a]) s += ", axis " + std::to_string(a) + " reversed";
    }
    if (broadcast_tokens) s += ", tokens broadcast";
    return s;
}

StridedMemory::StridedMemory(ref::DType dtype, const ref::Shape &shape, const Layout &layout)
    : dtype_(dtype), shape_(shape), strides_(shape.size(), 0) {
    std::vector<std::size_t> order(shape.size());  // outermost to innermost in memory
    std::iota(order.begin(), order.end(), 0);
    if (layout.transposed) std::reverse(order.begin(), order.end());
    std::int64_t span = 1;
    for (std::size_t k = order.size(); k-- > 0;) {
        const std::size_t axis = order[k];
        const bool innermost = k + 1 == order.size();
        strides_[axis] = innermost ? layout.inner_step : span;
        span = strides_[axis] * std::max<std::int64_t>(shape[axis], 1) + (innermost ? layout.row_padding : 0);
    }
    for (std::size_t a = 0; a < shape.size(); ++a) {
        if (a < layout.reversed.size() && layout.reversed[a] && shape[a] > 1) {
            offset_ += (shape[a] - 1) * strides_[a];
            strides_[a] = -strides_[a];
        }
    }
    if (layout.broadcast_tokens && !shape.empty()) {
        if (strides_[0] < 0) offset_ += (shape[0] - 1) * strides_[0];
        strides_[0] = 0;
    }
    memory_ = ref::HostTensor(dtype, {span});
    memory_.fill_bytes(0xAB);
}

void *StridedMemory::element0() const {
    return static_cast<unsigned char *>(const_cast<void *>(memory_.data())) + offset_ * static_cast<std::int64_t>(ref::element_size(dtype_));
}

void StridedMemory::write(const ref::HostTensor &values) {
    const std::size_t size = ref::element_size(dtype_);
    ref::for_each_offset_pair(shape_, strides_, ref::row_major_strides(shape_), [&](std::int64_t, std::int64_t at, std::int64_t from) {
        const std::uint32_t bits = values.bits(from);
        std::memcpy(memory_.data_at(offset_ + at), &bits, size);  // little-endian host
    });
}

std::vector<bool> StridedMemory::element_bytes() const {
    std::vector<bool> mask(memory_.bytes().size(), false);
    const auto size = static_cast<std::int64_t>(ref::element_size(dtype_));
    ref::for_each_offset_pair(shape_, strides_, strides_, [&](std::int64_t, std::int64_t at, std::int64_t) {
        for (std::int64_t b = 0; b < size; ++b) mask[static_cast<std::size_t>((offset_ + at) * size + b)] = true;
    });
    return mask;
}

}  // namespace backward_test
