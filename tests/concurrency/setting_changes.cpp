#include "setting_changes.hpp"

#include <chrono>

#include "magi2norm/magi2norm.hpp"

namespace concurrency {
namespace {

std::atomic<int> loop_calls{0};

// A host loop that runs the tasks on two threads of its own.
void two_thread_loop(void *, int count, void (*task)(void *, int), void *task_context) {
    loop_calls.fetch_add(1, std::memory_order_relaxed);
    std::thread other([&] {
        for (int i = 1; i < count; i += 2) task(task_context, i);
    });
    for (int i = 0; i < count; i += 2) task(task_context, i);
    other.join();
}

}  // namespace

void serial_loop(void *, int count, void (*task)(void *, int), void *task_context) {
    loop_calls.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < count; ++i) task(task_context, i);
}

int SettingChanges::host_loop_calls() { return loop_calls.load(); }

SettingChanges::SettingChanges() {
    threads_.emplace_back([this] {
        for (int i = 0; !done_; ++i, ++changes_) {
            magi2norm::set_num_threads(i % 4);  // 0 (the default), 1, 2, 3
            std::this_thread::yield();
        }
    });
    threads_.emplace_back([this] {
        const magi2norm::ParallelFor loops[] = {nullptr, two_thread_loop, nullptr, serial_loop};
        for (int i = 0; !done_; ++i, ++changes_) {
            magi2norm::set_parallel_for(loops[i % 4]);
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    });
    threads_.emplace_back([this] {
        const magi2norm::StreamingPolicy policies[] = {magi2norm::default_streaming_policy(), {1, 0, 0}, {0, 0, 0}, {1 << 20, 4, 64}};
        for (int i = 0; !done_; ++i, ++changes_) {
            magi2norm::set_streaming_policy(policies[i % 4]);
            std::this_thread::yield();
        }
    });
}

void SettingChanges::stop() {
    done_ = true;
    for (std::thread &t : threads_) {
        if (t.joinable()) t.join();
    }
    magi2norm::set_num_threads(0);
    magi2norm::set_parallel_for(nullptr);
    magi2norm::set_streaming_policy(magi2norm::default_streaming_policy());
}

SettingChanges::~SettingChanges() { stop(); }

}  // namespace concurrency
