// A view of a tensor's values laid out with given strides in GuardedMemory: its first or last
// byte adjoins a PROT_NONE page.
#pragma once

#include <memory>

#include "guarded_memory.hpp"
#include "reference/host_tensor.hpp"

namespace guard {

// The bytes [lo, hi) of a view's elements around its element 0.
void byte_range(const ref::Shape &shape, const ref::Shape &strides, ref::DType dtype, std::int64_t &lo, std::int64_t &hi);

// A view of `values` (dense, row-major) laid out with `strides` (empty: dense) in guarded memory.
struct GuardedView {
    GuardedView(const ref::HostTensor &values, const ref::Shape &strides_or_empty, Side side);
    ref::Shape strides;
    std::unique_ptr<GuardedMemory> memory;
    magi2norm::TensorView view;
};

}  // namespace guard
