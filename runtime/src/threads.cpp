// CPU threading: every parallel loop of a variant comes to forward_par_for, which runs it on
// the call's loop (CallContext): a host's parallel loop, or the library's pool (Halide's) with
// at most the call's thread count, by handing the pool that many tasks, each running a run of
// consecutive loop iterations.
#include <algorithm>
#include <atomic>
#include <mutex>

#include "HalideRuntime.h"
#include "halide_calls.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

namespace {

// The process's host loop, read by every call without a lock: a writer (set_parallel_for, under
// the mutex) makes `version` odd, stores both fields, then makes it even; a reader retries until
// it saw one even version before and after reading both.
std::mutex host_loop_mutex;
std::atomic<unsigned> host_loop_version{0};
std::atomic<ParallelFor> host_loop_run{nullptr};
std::atomic<void *> host_loop_context{nullptr};
std::atomic<int> pool_threads{0};  // set_num_threads; 0: every thread of the pool

ParallelLoop process_loop() {
    for (;;) {
        const unsigned before = host_loop_version.load(std::memory_order_acquire);
        const ParallelLoop loop{host_loop_run.load(std::memory_order_acquire), host_loop_context.load(std::memory_order_acquire)};
        if ((before & 1) == 0 && host_loop_version.load(std::memory_order_acquire) == before) return loop;
    }
}

// One halide_do_par_for call, as the host's tasks see it.
struct ParForCall {
    void *user_context;
    halide_task_t task;
    int min;
    std::uint8_t *closure;
    std::atomic<int> result{0};  // the first nonzero task result, which Halide reports as the error
};

void run_task(void *task_context, int index) {
    auto *call = static_cast<ParForCall *>(task_context);
    // halide_do_task honours a custom do_task, as Halide's own pool does.
    const int result = halide_do_task(call->user_context, call->task, call->min + index, call->closure);
    int none = 0;
    if (result != 0) call->result.compare_exchange_strong(none, result);
}

int run_serially(void *user_context, halide_task_t task, int min, int size, std::uint8_t *closure) {
    for (int i = min; i < min + size; ++i) {
        const int result = halide_do_task(user_context, task, i, closure);
        if (result != 0) return result;
    }
    return 0;
}

// A loop of `size` iterations as `groups` pool tasks of consecutive iterations.
struct Groups {
    halide_task_t task;
    int min, size, groups;
    std::uint8_t *closure;
};

int run_group(void *user_context, int group, std::uint8_t *closure) {
    const auto *g = reinterpret_cast<const Groups *>(closure);
    const int begin = static_cast<int>(static_cast<std::int64_t>(g->size) * group / g->groups);
    const int end = static_cast<int>(static_cast<std::int64_t>(g->size) * (group + 1) / g->groups);
    return run_serially(user_context, g->task, g->min + begin, end - begin, g->closure);
}

int forward_par_for(void *user_context, halide_task_t task, int min, int size, std::uint8_t *closure) {
    const auto *call = static_cast<const detail::CallContext *>(user_context);
    if (call->loop.run != nullptr) {
        ParForCall par_for{user_context, task, min, closure};
        call->loop.run(call->loop.context, size, run_task, &par_for);
        return par_for.result.load();
    }
    // One task (a tiny call), or one thread: here, as Halide's pool would only add a lock and a
    // wake-up.
    if (size <= 1 || call->num_threads == 1) return run_serially(user_context, task, min, size, closure);
    // Fewer threads than the pool has: as many pool tasks as threads (with the pool's own count,
    // its own scheduling, which balances better than fixed runs).
    if (call->num_threads > 1 && call->num_threads < size && call->num_threads < halide_get_num_threads()) {
        Groups groups{task, min, size, call->num_threads, closure};
        return halide_default_do_par_for(user_context, run_group, 0, groups.groups, reinterpret_cast<std::uint8_t *>(&groups));
    }
    return halide_default_do_par_for(user_context, task, min, size, closure);
}

}  // namespace

namespace detail {

// Called once, by install_halide_hooks, before the first variant runs (not from a static
// initialiser: a linker drops this file from a static library unless the host uses one of its
// functions). Never swapped out again: Halide reads its do_par_for pointer without
// synchronisation; the loop behind it is chosen per call.
void install_parallel_loop() { halide_set_custom_do_par_for(forward_par_for); }

void resolve_parallel_loop(CallContext &call, const std::optional<ParallelLoop> &loop, const std::optional<int> &threads) {
    call.loop = loop ? *loop : process_loop();
    call.num_threads = threads ? std::max(0, *threads) : pool_threads.load(std::memory_order_relaxed);
}

}  // namespace detail

// The one Halide runtime inside the library owns the pool all variants share; it grows to the
// count asked for, and each call then hands it at most that many tasks.
void set_num_threads(int n) {
    halide_set_num_threads(n <= 0 ? 0 : n);
    pool_threads.store(n <= 0 ? 0 : halide_get_num_threads(), std::memory_order_relaxed);
}

int num_threads() {
    if (const int n = pool_threads.load(std::memory_order_relaxed); n > 0) return n;
    // Halide's pool reports 0 until its first use; asking for the default settles the count.
    if (halide_get_num_threads() == 0) halide_set_num_threads(0);
    return halide_get_num_threads();
}

void set_parallel_for(ParallelFor parallel_for, void *context) {
    std::lock_guard<std::mutex> lock(host_loop_mutex);
    host_loop_version.fetch_add(1, std::memory_order_acq_rel);
    host_loop_run.store(parallel_for, std::memory_order_release);
    host_loop_context.store(parallel_for ? context : nullptr, std::memory_order_release);
    host_loop_version.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace magi2norm
