// The runtime's one overlap test: whether two memory regions share a byte.
#pragma once

#include <cstdint>

#include "views.hpp"

namespace magi2norm::detail {

// The bytes a view or the ids touch: [lo, hi) of `root`, an OpenCL buffer, or of the address
// space (root null). Empty spans overlap nothing.
struct ByteSpan {
    const void *root = nullptr;
    std::uint64_t lo = 0, hi = 0;
};

inline bool overlap(const ByteSpan &a, const ByteSpan &b) { return a.root == b.root && a.lo < b.hi && b.lo < a.hi; }

// The host addresses of a checked view at `data` (address_range).
inline ByteSpan host_span(const CheckedView &view, const void *data, const char *what) {
    const AddressRange r = address_range(view, data, what);
    return {nullptr, r.lo, r.hi};
}

}  // namespace magi2norm::detail
