// The process-wide StreamingPolicy (magi2norm.hpp). Which calls it sends to the streaming-store
// variants is decided in kernels.cpp (takes_streaming_stores).
#include <atomic>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

namespace {
// Each field on its own: a call that races with set_streaming_policy sees old or new values,
// and either choice gives the same results.
std::atomic<std::int64_t> min_output_bytes{StreamingPolicy{}.min_output_bytes};
std::atomic<int> min_element_bytes{StreamingPolicy{}.min_element_bytes};
std::atomic<std::int64_t> min_row_elements{StreamingPolicy{}.min_row_elements};
}  // namespace

void set_streaming_policy(const StreamingPolicy &policy) {
    min_output_bytes.store(policy.min_output_bytes, std::memory_order_relaxed);
    min_element_bytes.store(policy.min_element_bytes, std::memory_order_relaxed);
    min_row_elements.store(policy.min_row_elements, std::memory_order_relaxed);
}

StreamingPolicy streaming_policy() {
    return {min_output_bytes.load(std::memory_order_relaxed), min_element_bytes.load(std::memory_order_relaxed),
            min_row_elements.load(std::memory_order_relaxed)};
}

}  // namespace magi2norm
