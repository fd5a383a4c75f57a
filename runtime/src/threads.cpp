// CPU threading: the size of the library's pool, and a host's own parallel loop in its place.
#include <atomic>
#include <mutex>

#include "HalideRuntime.h"
#include "halide_calls.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

namespace {

struct HostLoop {
    ParallelFor parallel_for = nullptr;
    void *context = nullptr;
};

std::mutex host_loop_mutex;
HostLoop host_loop;  // guarded by host_loop_mutex

HostLoop current_host_loop() {
    std::lock_guard<std::mutex> lock(host_loop_mutex);
    return host_loop;
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

// Halide's parallel loops all come here: to the host's loop when there is one, else loops of
// more than one task to Halide's own pool; the rest run on the calling thread.
int forward_par_for(void *user_context, halide_task_t task, int min, int size, std::uint8_t *closure) {
    const HostLoop loop = current_host_loop();
    if (loop.parallel_for != nullptr) {
        ParForCall call{user_context, task, min, closure};
        loop.parallel_for(loop.context, size, run_task, &call);
        return call.result.load();
    }
    // One task (a tiny call) runs here too: Halide's pool would only add a lock and a wake-up.
    if (size > 1) return halide_default_do_par_for(user_context, task, min, size, closure);
    for (int i = min; i < min + size; ++i) {
        const int result = halide_do_task(user_context, task, i, closure);
        if (result != 0) return result;
    }
    return 0;
}

}  // namespace

namespace detail {

// Called once, by install_halide_hooks, before the first variant runs (not from a static
// initialiser: a linker drops this file from a static library unless the host uses one of its
// functions, and such hosts then ran on Halide's own pool, tiny calls included; NOTES.md).
// Never swapped out again: Halide reads its do_par_for pointer without synchronisation, so
// changing it while another thread runs a norm would be a data race. set_parallel_for switches
// the loop behind it, under a lock.
void install_parallel_loop() { halide_set_custom_do_par_for(forward_par_for); }

}  // namespace detail

// The one Halide runtime inside the library owns the thread pool all variants share.
void set_num_threads(int n) { halide_set_num_threads(n <= 0 ? 0 : n); }

int num_threads() {
    // Halide's pool reports 0 until its first use; asking for the default settles the count.
    if (halide_get_num_threads() == 0) halide_set_num_threads(0);
    return halide_get_num_threads();
}

void set_parallel_for(ParallelFor parallel_for, void *context) {
    std::lock_guard<std::mutex> lock(host_loop_mutex);
    host_loop = HostLoop{parallel_for, parallel_for ? context : nullptr};
}

}  // namespace magi2norm
