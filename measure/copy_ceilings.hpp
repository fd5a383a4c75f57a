// How fast this machine copies memory, measured in this process: the yardstick of the demo's
// norms and the copy ceilings of the benchmarks.
#pragma once

#include <cstddef>
#include <optional>

#include "aligned_buffer.hpp"

namespace magi2norm::measure {

// How a copy writes its destination.
enum class CopyKind {
    memcpy,            // the C library's memcpy
    ordinary_stores,   // a vector load/store loop whose stores go through the cache (each
                       // destination line is read for ownership first, as the norm's own
                       // ordinary stores are)
    streaming_stores,  // the same loop with streaming (non-temporal) stores, which skip that read
};

// Which summary of the timed runs a measurement gives: the fastest, or the mean (as a
// benchmark's time is a mean).
enum class Summary { best, mean };

struct CopyRun {
    CopyKind kind = CopyKind::memcpy;
    std::size_t bytes = 0;  // of each source and each destination; the loops need a multiple of 64
    std::size_t pairs = 1;  // source/destination pairs, copied one after the other in every run
    int threads = 1;        // each copies its cache-line aligned slice of every pair
    int runs = 3;           // timed runs, after one untimed
    Summary summary = Summary::best;
};

class CopyMeter {
public:
    // Bytes read plus bytes written per second of `run`.
    double bytes_per_second(const CopyRun &run);

private:
    // Every measurement's sources and destinations, allocated and touched once and grown when a
    // larger run needs it: page faults stay out of the timing and the run time.
    std::optional<AlignedBuffer> pool_;
    std::size_t pool_bytes_ = 0;
};

}  // namespace magi2norm::measure
