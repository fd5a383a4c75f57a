// What the memory system can do, measured in this process: three copy ceilings a bandwidth-bound
// norm is compared against, and the last-level cache size that decides buffer rotation.
#pragma once

#include <cstddef>

namespace magi2norm::bench {

// Bytes read plus bytes written per second of a large copy (source and destination each
// `bytes`), with `threads` threads each copying its slice (measure/copy_ceilings.hpp):
//   memcpy:          the C library's memcpy;
//   copy:            a vector load/store loop with ordinary stores, which go through the cache
//                    (the destination is read for ownership first, as the norm's own ordinary
//                    stores are);
//   streaming copy:  the same loop with streaming (non-temporal) stores, which skip that read.
struct Ceilings {
    double memcpy_bps = 0, copy_bps = 0, streaming_copy_bps = 0;
    int threads = 1;
    std::size_t bytes = 0;
};

// Measured on first use (about a second; the copies' 1 GiB of buffers stays allocated for the
// rest of the process, and ceilings_now() reuses it), with magi2norm::num_threads() threads,
// best of 3 runs each; the same numbers for the rest of the process. The report's header
// quotes these.
const Ceilings &ceilings();

// Measured now, with the same 512 MiB copies, the mean of 3 runs each, as a benchmark's time is
// a mean: about 0.4 s. A case's fractions use the ceilings measured around it
// (benchmarks/harness.cpp), so that load from other tenants of a shared machine, which changes
// within a run, changes both sides of the ratio alike.
Ceilings ceilings_now();

// Size of the largest CPU cache in bytes (sysfs; 32 MiB when it cannot be read).
std::size_t last_level_cache_bytes();

}  // namespace magi2norm::bench
