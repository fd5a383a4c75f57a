// Host memory for the tests: a contiguous owning tensor, and element access into any strided
// view (strides in elements, possibly 0 or negative, as in magi2norm's views). Values are read
// as FP32 and written with round-to-nearest-even through reference/float16.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"
#include "reference/float16.hpp"

namespace ref {

using magi2norm::ConstTensorView;
using magi2norm::DType;
using magi2norm::TensorView;
using Shape = std::vector<std::int64_t>;

// Storage aligned to 64 bytes, as tensor allocators give it (PyTorch's CPU allocator does): the
// library writes aligned outputs from memory with its streaming-store variants, so the tests'
// outputs reach them.
template <typename T>
struct CacheLineAllocator {
    using value_type = T;
    static constexpr std::align_val_t kAlignment{64};
    CacheLineAllocator() = default;
    template <typename U>
    CacheLineAllocator(const CacheLineAllocator<U> &) {}  // NOLINT: allocators convert implicitly
    T *allocate(std::size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), kAlignment)); }
    void deallocate(T *p, std::size_t) { ::operator delete(p, kAlignment); }
    friend bool operator==(CacheLineAllocator, CacheLineAllocator) { return true; }
    friend bool operator!=(CacheLineAllocator, CacheLineAllocator) { return false; }
};
using Bytes = std::vector<unsigned char, CacheLineAllocator<unsigned char>>;

inline std::size_t element_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }
std::int64_t num_elements(const Shape &shape);
Shape row_major_strides(const Shape &shape);
// "[2, 0, 17]"
std::string format_shape(const Shape &shape);
// The index of the `flat`-th element of `shape` in row-major order.
Shape unravel(std::int64_t flat, const Shape &shape);

// Raw bit pattern (16 or 32 bits) and FP32 value of the element `offset` elements from `base`
// (inline: the tests read tens of millions of elements).
inline std::uint32_t load_bits(DType dtype, const void *base, std::int64_t offset) {
    const auto *bytes = static_cast<const unsigned char *>(base) + offset * static_cast<std::int64_t>(element_size(dtype));
    if (dtype == DType::f32) {
        std::uint32_t bits;
        std::memcpy(&bits, bytes, sizeof bits);
        return bits;
    }
    std::uint16_t bits;
    std::memcpy(&bits, bytes, sizeof bits);
    return bits;
}

inline float load_value(DType dtype, const void *base, std::int64_t offset) {
    const std::uint32_t bits = load_bits(dtype, base, offset);
    if (dtype == DType::bf16) return bf16_to_f32(static_cast<std::uint16_t>(bits));
    if (dtype == DType::f16) return f16_to_f32(static_cast<std::uint16_t>(bits));
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}
// Stores `value` rounded to nearest even in `dtype`.
void store_value(DType dtype, void *base, std::int64_t offset, float value);

// Calls f(index) for every index of `shape` in row-major order (index is a Shape).
template <typename F>
void for_each_index(const Shape &shape, F &&f) {
    if (num_elements(shape) == 0) return;
    Shape index(shape.size(), 0);
    for (;;) {
        f(static_cast<const Shape &>(index));
        std::size_t axis = shape.size();
        while (axis > 0) {
            --axis;
            if (++index[axis] < shape[axis]) break;
            index[axis] = 0;
            if (axis == 0) return;
        }
        if (shape.empty()) return;
    }
}

// Walks `shape` in row-major order and calls f(flat, offset_a, offset_b): the element's flat
// index and its offsets under two stride vectors (two views of one shape, walked in step).
// Offsets advance incrementally, so a walk costs O(1) per element whatever the rank; the stride
// of an axis of extent 1 is never applied.
template <typename F>
void for_each_offset_pair(const Shape &shape, const Shape &strides_a, const Shape &strides_b, F &&f) {
    const std::int64_t count = num_elements(shape);
    if (count == 0) return;
    if (shape.empty()) {
        f(std::int64_t{0}, std::int64_t{0}, std::int64_t{0});
        return;
    }
    const std::size_t inner = shape.size() - 1;
    Shape index(shape.size(), 0);
    std::int64_t row_a = 0, row_b = 0, flat = 0;
    while (flat < count) {
        for (std::int64_t i = 0; i < shape[inner]; ++i, ++flat) f(flat, row_a + i * strides_a[inner], row_b + i * strides_b[inner]);
        for (std::size_t axis = inner; axis-- > 0;) {
            if (shape[axis] == 1) continue;  // never steps: its stride, however large, is never applied
            row_a += strides_a[axis];
            row_b += strides_b[axis];
            if (++index[axis] < shape[axis]) break;
            row_a -= strides_a[axis] * shape[axis];
            row_b -= strides_b[axis] * shape[axis];
            index[axis] = 0;
        }
    }
}

// A view with its strides resolved (row-major when the view leaves them empty).
class ViewReader {
public:
    explicit ViewReader(const ConstTensorView &view);

    DType dtype() const { return view_.dtype; }
    const Shape &shape() const { return view_.shape; }
    const Shape &strides() const { return strides_; }
    std::int64_t offset(const Shape &index) const;
    float value(const Shape &index) const { return load_value(view_.dtype, view_.data, offset(index)); }
    std::uint32_t bits(const Shape &index) const { return load_bits(view_.dtype, view_.data, offset(index)); }
    float value_at(std::int64_t offset) const { return load_value(view_.dtype, view_.data, offset); }

private:
    ConstTensorView view_;
    Shape strides_;
};

// A contiguous row-major tensor that owns its bytes (zero-filled on creation).
class HostTensor {
public:
    HostTensor() = default;
    HostTensor(DType dtype, Shape shape);
    // The values of `view`, in row-major order, converted to `dtype` (round to nearest even).
    static HostTensor copy_of(const ConstTensorView &view, DType dtype);
    static HostTensor copy_of(const ConstTensorView &view) { return copy_of(view, view.dtype); }

    DType dtype() const { return dtype_; }
    const Shape &shape() const { return shape_; }
    std::int64_t size() const { return num_elements(shape_); }
    void *data() { return bytes_.data(); }
    const void *data() const { return bytes_.data(); }
    // The address of element `flat` (row-major), e.g. where a view into the tensor starts.
    void *data_at(std::int64_t flat) { return bytes_.data() + flat * static_cast<std::int64_t>(element_size(dtype_)); }
    const void *data_at(std::int64_t flat) const {
        return bytes_.data() + flat * static_cast<std::int64_t>(element_size(dtype_));
    }
    const Bytes &bytes() const { return bytes_; }

    float get(std::int64_t i) const { return load_value(dtype_, bytes_.data(), i); }
    void set(std::int64_t i, float value) { store_value(dtype_, bytes_.data(), i, value); }
    std::uint32_t bits(std::int64_t i) const { return load_bits(dtype_, bytes_.data(), i); }
    void fill_bytes(unsigned char byte);

    TensorView view() { return TensorView(data(), dtype_, shape_); }
    ConstTensorView view() const { return ConstTensorView(data(), dtype_, shape_); }
    HostTensor cast(DType dtype) const { return copy_of(view(), dtype); }

private:
    DType dtype_ = DType::f32;
    Shape shape_;
    Bytes bytes_;
};

}  // namespace ref
