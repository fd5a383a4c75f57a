#include "reference/host_tensor.hpp"

#include <cstring>
#include <stdexcept>

#include "reference/float16.hpp"

namespace ref {

std::int64_t num_elements(const Shape &shape) {
    std::int64_t n = 1;
    for (std::int64_t extent : shape) n *= extent;
    return n;
}

Shape row_major_strides(const Shape &shape) {
    Shape strides(shape.size(), 1);
    for (std::size_t axis = shape.size(); axis > 1; --axis) strides[axis - 2] = strides[axis - 1] * shape[axis - 1];
    return strides;
}

std::string format_shape(const Shape &shape) {
    std::string text = "[";
    for (std::size_t axis = 0; axis < shape.size(); ++axis) {
        if (axis > 0) text += ", ";
        text += std::to_string(shape[axis]);
    }
    return text + "]";
}

Shape unravel(std::int64_t flat, const Shape &shape) {
    Shape index(shape.size(), 0);
    for (std::size_t axis = shape.size(); axis-- > 0;) {
        index[axis] = flat % shape[axis];
        flat /= shape[axis];
    }
    return index;
}

void store_value(DType dtype, void *base, std::int64_t offset, float value) {
    auto *bytes = static_cast<unsigned char *>(base) + offset * static_cast<std::int64_t>(element_size(dtype));
    switch (dtype) {
    case DType::f32: std::memcpy(bytes, &value, sizeof value); return;
    case DType::bf16: {
        const std::uint16_t bits = f32_to_bf16(value);
        std::memcpy(bytes, &bits, sizeof bits);
        return;
    }
    case DType::f16: {
        const std::uint16_t bits = f32_to_f16(value);
        std::memcpy(bytes, &bits, sizeof bits);
        return;
    }
    }
    throw std::logic_error("unknown dtype");
}

ViewReader::ViewReader(const ConstTensorView &view)
    : view_(view), strides_(view.strides.empty() ? row_major_strides(view.shape) : view.strides) {
    if (strides_.size() != view.shape.size()) throw std::invalid_argument("reference: strides and shape differ in rank");
}

std::int64_t ViewReader::offset(const Shape &index) const {
    std::int64_t offset = 0;
    for (std::size_t axis = 0; axis < index.size(); ++axis) offset += index[axis] * strides_[axis];
    return offset;
}

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)),
      bytes_(static_cast<std::size_t>(num_elements(shape_)) * element_size(dtype), 0) {}

HostTensor HostTensor::copy_of(const ConstTensorView &view, DType dtype) {
    HostTensor copy(dtype, view.shape);
    const ViewReader reader(view);
    const std::size_t size = element_size(dtype);
    for_each_offset_pair(view.shape, reader.strides(), row_major_strides(view.shape),
                         [&](std::int64_t, std::int64_t from, std::int64_t to) {
                             if (dtype == view.dtype) {
                                 // Same dtype: copy the bits, so NaN payloads survive as they are.
                                 const std::uint32_t bits = load_bits(dtype, view.data, from);
                                 std::memcpy(copy.bytes_.data() + to * size, &bits, size);  // little-endian host
                             } else {
                                 copy.set(to, reader.value_at(from));
                             }
                         });
    return copy;
}

void HostTensor::fill_bytes(unsigned char byte) { std::memset(bytes_.data(), byte, bytes_.size()); }

}  // namespace ref
