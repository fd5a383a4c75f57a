// The runtime's one overlap test: whether two strided views share a byte, or one view's elements
// share memory with each other, decided exactly over their elements as NumPy's shares_memory
// does (a bounded search for a solution of a linear Diophantine equation over the views' index
// sets), refusing where the bound on the work is reached.
#pragma once

#include <cstdint>

#include "views.hpp"

namespace magi2norm::detail {

// The search steps one decision may take before it gives up (a step is one value tried for one
// index; views met in practice take a few dozen).
constexpr std::int64_t kOverlapWork = 1 << 16;

// The elements of a view: [lo, hi) the bytes they span within `root` (an OpenCL buffer) or the
// address space (root null), and the view's geometry (strides in elements), which must outlive
// the region. Empty regions share nothing.
struct Region {
    const void *root = nullptr;
    std::uint64_t lo = 0, hi = 0;
    std::int64_t elem_bytes = 1;
    const Dims *shape = nullptr, *strides = nullptr;
};

// A checked view at host address `data` (address_range: Error(null_data), Error(overflow)).
Region host_region(const CheckedView &view, const void *data, const char *what);

enum class Sharing { none, shared, undecided };

// Whether a byte lies in an element of `a` and in an element of `b`.
Sharing shares_memory(const Region &a, const Region &b, std::int64_t max_work = kOverlapWork);
// Whether two different indices of `view` address overlapping memory.
Sharing overlaps_itself(const CheckedView &view, std::int64_t max_work = kOverlapWork);

// Error(overlap) unless `a` and `b` share no byte: "<what_a> and <what_b> overlap: ...<why>",
// or, where the bound was reached, a message that says the test did not decide.
void check_disjoint(const Region &a, const char *what_a, const Region &b, const char *what_b, const char *why);
// Error(stride) unless no two elements of a written view share memory.
void check_no_self_overlap(const CheckedView &view, const char *what);

}  // namespace magi2norm::detail
