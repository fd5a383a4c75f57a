// A tensor's values laid out in memory the test owns, in a layout picked by the test: dense,
// rows padded, every other element, axes in reverse memory order (transposed), axes reversed
// (negative strides), axis 0 broadcast (stride 0). Bytes between the elements hold 0xAB.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/host_tensor.hpp"

namespace backward_test {

struct Layout {
    bool transposed = false;          // the first axis innermost in memory
    std::int64_t inner_step = 1;      // elements between neighbours along the innermost axis
    std::int64_t row_padding = 0;     // elements added after each run of the innermost axis
    std::vector<bool> reversed;       // per axis: a negative stride (empty: none)
    bool broadcast_tokens = false;    // axis 0 stride 0
    std::string describe() const;
};

class StridedMemory {
public:
    StridedMemory(ref::DType dtype, const ref::Shape &shape, const Layout &layout);
    // Writes the row-major `values` (same shape) through the view; with a broadcast axis the
    // last token's values are those every token reads.
    void write(const ref::HostTensor &values);
    magi2norm::TensorView view() { return {element0(), dtype_, shape_, strides_}; }
    magi2norm::ConstTensorView view() const { return {element0(), dtype_, shape_, strides_}; }
    // The same memory and strides seen as another dtype of the same size (dx over dy).
    magi2norm::TensorView view_as(ref::DType dtype) { return {element0(), dtype, shape_, strides_}; }
    const ref::Bytes &bytes() const { return memory_.bytes(); }
    // Whether byte `b` of the memory belongs to an element of the view.
    std::vector<bool> element_bytes() const;

private:
    void *element0() const;
    ref::DType dtype_;
    ref::Shape shape_, strides_;
    std::int64_t offset_ = 0;  // of element 0, in elements
    ref::HostTensor memory_;
};

}  // namespace backward_test
