// The library's pool (worker_pool.hpp). Each worker has a slot the caller posts a call to; the
// caller claims iterations itself, then, slot by slot, either keeps out a worker that has not
// entered the call (one compare-exchange) or waits for one that has to leave it. Every handover
// is a std::atomic, so ThreadSanitizer sees all of them.
#include "worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include "magi2norm_build_knobs.hpp"

namespace magi2norm::detail {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

thread_local bool inside_pool_call = false;  // this thread runs a pool call's iterations

struct Slot {
    std::uint64_t posted = 0;               // the caller's count of calls posted (under the pool's mutex)
    std::atomic<std::uint64_t> job{0};      // the last call posted
    std::atomic<ClaimedLoop *> call{nullptr};
    std::atomic<std::uint64_t> entered{0};  // the last call the worker entered or was kept out of
    std::atomic<std::uint64_t> left{0};     // the last call the worker left
    std::atomic<bool> sleeping{false};
    std::mutex mutex;
    std::condition_variable wake;
};

class Pool {
public:
    std::optional<int> try_run(int threads, int size, PoolTask task, void *context) {
        if (inside_pool_call) return std::nullopt;
        std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
        if (!lock.owns_lock()) return std::nullopt;
        const std::size_t helpers = grow(static_cast<std::size_t>(threads - 1));
        ClaimedLoop call{task, context, size};
        for (std::size_t i = 0; i < helpers; ++i) post(*slots_[i], &call);
        inside_pool_call = true;
        call.claim();
        inside_pool_call = false;
        for (std::size_t i = 0; i < helpers; ++i) {
            Slot &slot = *slots_[i];
            std::uint64_t before = slot.posted - 1;
            if (!slot.entered.compare_exchange_strong(before, slot.posted, std::memory_order_acq_rel)) {
                while (slot.left.load(std::memory_order_acquire) != slot.posted) cpu_relax();
            }
        }
        return call.result.load(std::memory_order_relaxed);
    }

private:
    // At least `wanted` workers where threads can be started; returns how many there are.
    std::size_t grow(std::size_t wanted) {
        while (slots_.size() < wanted) {
            auto slot = std::make_unique<Slot>();
            try {
                std::thread(work, slot.get()).detach();
            } catch (const std::system_error &) {
                break;  // no more threads: run on those there are
            }
            slots_.push_back(std::move(slot));
        }
        return std::min(wanted, slots_.size());
    }

    static void post(Slot &slot, ClaimedLoop *call) {
        slot.call.store(call, std::memory_order_relaxed);
        slot.job.store(++slot.posted, std::memory_order_seq_cst);
        if (slot.sleeping.load(std::memory_order_seq_cst)) {
            std::lock_guard<std::mutex> lock(slot.mutex);
            slot.wake.notify_one();
        }
    }

    // A worker's life: poll for a job for pool_spin_microseconds, then sleep until one comes;
    // enter the call unless the caller kept it out, claim iterations, leave.
    static void work(Slot *slot) {
        inside_pool_call = true;  // a loop nested in an iteration runs where it is
        const std::chrono::microseconds spin{knobs::pool_spin_microseconds};
        std::uint64_t seen = 0;
        for (;;) {
            const auto spin_end = std::chrono::steady_clock::now() + spin;
            for (unsigned polls = 0; slot->job.load(std::memory_order_acquire) == seen; ++polls) {
                cpu_relax();
                if (polls % 64 == 63 && std::chrono::steady_clock::now() > spin_end) {
                    std::unique_lock<std::mutex> lock(slot->mutex);
                    slot->sleeping.store(true, std::memory_order_seq_cst);
                    slot->wake.wait(lock, [&] { return slot->job.load(std::memory_order_seq_cst) != seen; });
                    slot->sleeping.store(false, std::memory_order_relaxed);
                }
            }
            seen = slot->job.load(std::memory_order_acquire);
            std::uint64_t before = seen - 1;
            if (slot->entered.compare_exchange_strong(before, seen, std::memory_order_acq_rel)) {
                slot->call.load(std::memory_order_relaxed)->claim();
                slot->left.store(seen, std::memory_order_release);
            }
        }
    }

    std::mutex mutex_;  // held by the call running on the pool
    std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace

void ClaimedLoop::claim() {
    for (int i = next.fetch_add(1, std::memory_order_relaxed); i < size; i = next.fetch_add(1, std::memory_order_relaxed)) {
        if (result.load(std::memory_order_relaxed) != 0) return;
        const int r = task(context, i);
        int none = 0;
        if (r != 0) result.compare_exchange_strong(none, r);
    }
}

std::optional<int> try_run_on_pool(int threads, int size, PoolTask task, void *context) {
    // Never destroyed: its workers, detached, may still poll their slots while the process exits.
    static Pool *const pool = new Pool;
    return pool->try_run(threads, size, task, context);
}

}  // namespace magi2norm::detail
