// CPU threading: every parallel loop of a variant comes to forward_par_for, which runs it on
// the call's loop (CallContext): a host's parallel loop, or else the library's own pool
// (worker_pool.hpp) with at most the call's thread count. Where the library's pool is in use (a
// call from another host thread at the same time), Halide's pool runs the loop instead, handed
// no more tasks than the call's count, each taking the loop's iterations one at a time until
// none are left: Halide's pool keeps every thread it ever started, and its own setting only
// bounds how many it starts, so a pool grown to two threads would run a one-thread call's tasks
// on both.
#include <algorithm>
#include <atomic>
#include <mutex>

#include "HalideRuntime.h"
#include "halide_calls.hpp"
#include "worker_pool.hpp"
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
std::atomic<int> pool_threads{0};  // the calls' thread count (set_num_threads); 0 until first asked

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

int run_pool_task(void *task_context, int index) {
    auto *call = static_cast<ParForCall *>(task_context);
    return halide_do_task(call->user_context, call->task, call->min + index, call->closure);
}

int run_serially(void *user_context, halide_task_t task, int min, int size, std::uint8_t *closure) {
    for (int i = min; i < min + size; ++i) {
        const int result = halide_do_task(user_context, task, i, closure);
        if (result != 0) return result;
    }
    return 0;
}

// A loop run as at most the call's thread count of Halide's pool tasks, each claiming its
// iterations until none are left (balanced like the pool's own scheduling).
struct Workers {
    detail::ClaimedLoop loop;
    // Released by the caller before the pool starts and acquired by each worker first, and
    // released by each worker at its end and acquired by the caller once the pool returns:
    // Halide's pool synchronises through its own uninstrumented mutex, which ThreadSanitizer
    // cannot see, so these order the workers' accesses visibly after the caller's setup and
    // before the caller's next use of its stack.
    std::atomic<int> started{0}, finished{0};
};

int run_worker(void *, int, std::uint8_t *closure) {
    auto *w = reinterpret_cast<Workers *>(closure);
    w->started.load(std::memory_order_acquire);
    w->loop.claim();
    const int result = w->loop.result.load();
    w->finished.fetch_add(1, std::memory_order_release);
    return result;
}

int forward_par_for(void *user_context, halide_task_t task, int min, int size, std::uint8_t *closure) {
    const auto *call = static_cast<const detail::CallContext *>(user_context);
    // A pipeline that shares the library's Halide runtime without its context runs on Halide's
    // pool, as it would without the library.
    if (call == nullptr) return halide_default_do_par_for(user_context, task, min, size, closure);
    if (call->loop.run != nullptr) {
        ParForCall par_for{user_context, task, min, closure};
        call->loop.run(call->loop.context, size, run_task, &par_for);
        return par_for.result.load();
    }
    // One task (a tiny call), or one thread: here, as Halide's pool would only add a lock and a
    // wake-up.
    if (size <= 1 || call->num_threads <= 1) return run_serially(user_context, task, min, size, closure);
    ParForCall par_for{user_context, task, min, closure};
    if (const std::optional<int> result = detail::try_run_on_pool(std::min(call->num_threads, size), size, run_pool_task, &par_for)) {
        return *result;
    }
    // No more tasks than threads: Halide's pool may hold more threads than the call may use.
    if (call->num_threads < size) {
        Workers workers{{run_pool_task, &par_for, size}};
        workers.started.store(1, std::memory_order_release);
        const int result =
            halide_default_do_par_for(user_context, run_worker, 0, call->num_threads, reinterpret_cast<std::uint8_t *>(&workers));
        workers.finished.load(std::memory_order_acquire);
        return result;
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
    call.num_threads = threads && *threads > 0 ? *threads : num_threads();
}

}  // namespace detail

// The count every call without its own takes: the library's pool starts workers up to it when
// a call first needs them, and Halide's pool, the fallback, grows to it (threads either started
// before stay, idle); a call then runs on at most that many threads.
void set_num_threads(int n) {
    halide_set_num_threads(n <= 0 ? 0 : n);
    pool_threads.store(halide_get_num_threads(), std::memory_order_relaxed);
}

int num_threads() {
    if (const int n = pool_threads.load(std::memory_order_relaxed); n > 0) return n;
    // Halide's pool reports 0 until its first use; asking for the default settles the count.
    if (halide_get_num_threads() == 0) halide_set_num_threads(0);
    const int n = halide_get_num_threads();
    int unset = 0;
    pool_threads.compare_exchange_strong(unset, n, std::memory_order_relaxed);
    return pool_threads.load(std::memory_order_relaxed);
}

void set_parallel_for(ParallelFor parallel_for, void *context) {
    std::lock_guard<std::mutex> lock(host_loop_mutex);
    host_loop_version.fetch_add(1, std::memory_order_acq_rel);
    host_loop_run.store(parallel_for, std::memory_order_release);
    host_loop_context.store(parallel_for ? context : nullptr, std::memory_order_release);
    host_loop_version.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace magi2norm
