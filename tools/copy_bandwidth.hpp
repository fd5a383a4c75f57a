// The yardstick of the demo: how fast this machine copies memory with the same thread count.
#pragma once

#include <cstddef>
#include <map>

#include "copy_ceilings.hpp"

namespace magi2norm::cli {

// Small copies rotate through enough buffers to cover this much memory, so that they stream from
// DRAM like the large tensors of the model instead of hitting in the caches; the demo's norms do
// the same.
constexpr std::size_t kDramFootprint = std::size_t{256} << 20;

class CopyBandwidth {
public:
    explicit CopyBandwidth(int threads) : threads_(threads < 1 ? 1 : threads) {}

    // GB/s (bytes read + bytes written, 1e9 bytes per GB) of a memcpy that moves
    // `traffic_bytes` in total, split across the threads; best of `repeats` after a warm-up.
    // Measured once per traffic size.
    double gbps(std::size_t traffic_bytes, int repeats);

private:
    int threads_;
    measure::CopyMeter meter_;
    std::map<std::size_t, double> measured_;  // traffic bytes -> GB/s
};

}  // namespace magi2norm::cli
