// The process-wide StreamingPolicy (magi2norm.hpp), which starts as the build's: its
// min_output_bytes is the runtime knob streaming_min_output_bytes (magi2norm_build_knobs.hpp).
// Which calls it sends to the streaming-store variants is decided in call_plan.cpp (policy_admits).
#include <atomic>

#include "magi2norm/magi2norm.hpp"
#include "magi2norm_build_knobs.hpp"

namespace magi2norm {

namespace {
constexpr StreamingPolicy build_policy() {
    StreamingPolicy policy;
    policy.min_output_bytes = detail::knobs::streaming_min_output_bytes;
    return policy;
}

// Each field on its own: a call that races with set_streaming_policy sees old or new values,
// and either choice gives the same results.
std::atomic<std::int64_t> min_output_bytes{build_policy().min_output_bytes};
std::atomic<int> min_element_bytes{build_policy().min_element_bytes};
std::atomic<std::int64_t> min_row_elements{build_policy().min_row_elements};
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

StreamingPolicy default_streaming_policy() { return build_policy(); }

}  // namespace magi2norm
