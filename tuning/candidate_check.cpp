#include "candidate_check.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

namespace magi2norm::tuning {

namespace {

// The first case whose output differs, as a verdict; "ok" when none does.
std::string compare_outputs(ClassCases &c, const std::vector<detail::KernelEntry> &kernels) {
    try {
        for (std::size_t i = 0; i < c.cases.size(); ++i) {
            if (c.benches[i]->output(&kernels[i]) != c.expected[i]) {
                return "rejected: its output on " + c.cases[i]->id + " differs from the library's";
            }
        }
        return "ok";
    } catch (const std::exception &e) {
        return std::string("rejected: ") + e.what();
    }
}

// The child's verdict from its pipe; a check that hangs (a candidate that never ends) is ended
// after two minutes.
std::string child_verdict(pid_t pid, int fd) {
    std::string verdict;
    char buffer[512];
    bool timed_out = false;
    for (;;) {
        pollfd ready{fd, POLLIN, 0};
        if (poll(&ready, 1, 120000) <= 0) {
            timed_out = true;
            kill(pid, SIGKILL);
            break;
        }
        const ssize_t n = read(fd, buffer, sizeof buffer);
        if (n <= 0) break;
        verdict.append(buffer, static_cast<std::size_t>(n));
    }
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
    if (timed_out) return "rejected: its check did not end within 120 s";
    if (WIFSIGNALED(status)) return "rejected: it faulted (signal " + std::to_string(WTERMSIG(status)) + ")";
    return verdict.empty() ? "rejected: the check ended without a verdict" : verdict;
}

}  // namespace

std::string check_candidate(ClassCases &c, const std::vector<detail::KernelEntry> &kernels, Backend backend) {
    // A GPU driver's threads do not survive a fork: checked here (a fault ends the run).
    if (backend != Backend::cpu) return compare_outputs(c, kernels);
    int pipe_fd[2];
    if (pipe(pipe_fd) != 0) return "rejected: cannot check (no pipe)";
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(pipe_fd[0]);
        // One thread, through a host loop: Halide's pool (and halide_set_num_threads) takes a
        // mutex that one of the parent's workers may have held at the fork.
        set_parallel_for([](void *, int count, void (*task)(void *, int), void *task_context) {
            for (int i = 0; i < count; ++i) task(task_context, i);
        });
        const std::string verdict = compare_outputs(c, kernels);
        if (write(pipe_fd[1], verdict.data(), verdict.size()) < 0) _exit(3);
        _exit(0);
    }
    close(pipe_fd[1]);
    return child_verdict(pid, pipe_fd[0]);
}

}  // namespace magi2norm::tuning
