// The copy ceilings: how fast this machine copies memory, measured in this process, which the
// benchmarks', the tuner's and the demo's norm rates are fractions of.
#pragma once

#include <cstddef>
#include <map>
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

// The three ceilings of a large copy (512 MiB each side, far beyond any last-level cache), bytes
// read plus bytes written per second, with `threads` threads each copying its slice:
//   memcpy:          the C library's memcpy;
//   copy:            CopyKind::ordinary_stores, the norm's own store kind;
//   streaming copy:  CopyKind::streaming_stores.
struct CopyCeilings {
    double memcpy_bps = 0, copy_bps = 0, streaming_copy_bps = 0;
    int threads = 1;
    std::size_t bytes = 0;
};

// Measured on first use (about a second; the copies' 1 GiB of buffers stays allocated for the
// rest of the process, and copy_ceilings_now() reuses it), best of 3 runs each; the same numbers
// for the rest of the process, whatever `threads` later calls pass.
const CopyCeilings &copy_ceilings(int threads);

// Measured now, with the same copies, the mean of 3 runs each, as a benchmark's time is a mean:
// about 0.4 s. Cases measured against the ceilings around them see load from other tenants of a
// shared machine, which changes within a run, on both sides of the ratio alike.
CopyCeilings copy_ceilings_now(int threads);

// Small copies rotate through enough buffers to cover this much memory, so that they stream from
// DRAM like the large tensors of the model instead of hitting in the caches; the demo's norms do
// the same.
constexpr std::size_t kDramFootprint = std::size_t{256} << 20;

// The memcpy ceiling of a call's size, the demo's yardstick: GB/s (bytes read + bytes written,
// 1e9 bytes per GB) of a memcpy that moves `traffic_bytes` in total, split across the threads and
// rotating through kDramFootprint; best of `repeats` after a warm-up, measured once per size.
class MemcpyCeilingBySize {
public:
    explicit MemcpyCeilingBySize(int threads) : threads_(threads < 1 ? 1 : threads) {}
    double gbps(std::size_t traffic_bytes, int repeats);

private:
    int threads_;
    CopyMeter meter_;
    std::map<std::size_t, double> measured_;  // traffic bytes -> GB/s
};

}  // namespace magi2norm::measure
