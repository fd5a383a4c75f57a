// The library's own CPU pool: the calling thread and persistent workers claim a loop's
// iterations from one counter. The caller never waits for a worker that has not started (one
// that wakes late finds the work done and the call gone), so a call costs no wake-up it does not
// use: a small call after an idle gap runs on the caller alone rather than waiting for a
// sleeping thread. A worker polls for the runtime knob pool_spin_microseconds after its
// last job, then sleeps until the next.
#pragma once

#include <atomic>
#include <optional>

namespace magi2norm::detail {

// One iteration of a loop: its result, 0 for success; the first nonzero one is the loop's.
using PoolTask = int (*)(void *context, int index);

// A loop whose iterations any number of threads take one at a time from a counter (claim), until
// none are left or one has failed: the first nonzero result is the loop's, and the iterations
// not yet taken are skipped. Both the library's pool and its fallback on Halide's run loops so.
struct ClaimedLoop {
    PoolTask task;
    void *context;
    int size;
    std::atomic<int> next{0};
    std::atomic<int> result{0};

    void claim();
};

// Runs task(context, i) for every i in [0, size) on the calling thread and at most threads - 1
// workers (started the first time they are needed, kept after). Returns the loop's result, or
// nothing, having run nothing, when the pool is in use: by another thread's call, or by this
// thread's own (a loop nested in one of its iterations).
std::optional<int> try_run_on_pool(int threads, int size, PoolTask task, void *context);

}  // namespace magi2norm::detail
