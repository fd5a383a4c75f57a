// Threads that keep changing the process's settings (thread count, parallel loop, streaming
// policy) until stopped, for the tests that call shared norms meanwhile.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

namespace concurrency {

// A host loop (ParallelFor) that runs the tasks in order on the calling thread; counted in
// SettingChanges::host_loop_calls, as the loops the settings install are.
void serial_loop(void *context, int count, void (*task)(void *, int), void *task_context);

class SettingChanges {
public:
    SettingChanges();   // starts the threads
    ~SettingChanges();  // stops them and restores the defaults
    SettingChanges(const SettingChanges &) = delete;
    SettingChanges &operator=(const SettingChanges &) = delete;

    void stop();
    int changes() const { return changes_.load(); }
    // Loops run by serial_loop and by the host loops the settings install.
    static int host_loop_calls();

private:
    std::atomic<bool> done_{false};
    std::atomic<int> changes_{0};
    std::vector<std::thread> threads_;
};

}  // namespace concurrency
