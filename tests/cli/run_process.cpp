#include "run_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <stdexcept>

#include "test_files.hpp"

extern char **environ;

namespace cli_test {

Process start_process(const std::vector<std::string> &argv, const std::string &scratch_dir,
                      const std::vector<std::string> &env) {
    Process process{-1, scratch_dir + "/stdout.txt", scratch_dir + "/stderr.txt"};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, process.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, process.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);

    std::vector<char *> args, environment;
    for (const std::string &arg : argv) args.push_back(const_cast<char *>(arg.c_str()));
    args.push_back(nullptr);
    for (char **e = environ; *e != nullptr; ++e) environment.push_back(*e);
    for (const std::string &e : env) environment.push_back(const_cast<char *>(e.c_str()));
    environment.push_back(nullptr);
    // SIGINT and SIGTERM at their defaults, whatever this process inherited (a shell's
    // background job ignores SIGINT), so that a test can signal the child.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    const int spawn_error = posix_spawn(&pid, args[0], &actions, &attributes, args.data(), environment.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (spawn_error != 0) throw std::runtime_error("cannot start " + argv[0]);
    process.pid = pid;
    return process;
}

ProcessResult wait_process(const Process &process) {
    int wait_status = 0;
    while (waitpid(process.pid, &wait_status, 0) < 0) {
        if (errno != EINTR) throw std::runtime_error("waitpid failed for process " + std::to_string(process.pid));
    }
    ProcessResult result;
    result.exited = WIFEXITED(wait_status);
    result.status = result.exited ? WEXITSTATUS(wait_status) : WTERMSIG(wait_status);
    result.out = read_file(process.out_path);
    result.err = read_file(process.err_path);
    return result;
}

ProcessResult run_process(const std::vector<std::string> &argv, const std::string &scratch_dir) {
    return wait_process(start_process(argv, scratch_dir));
}

std::string describe(const ProcessResult &result) {
    const std::string how = result.exited ? "exit " + std::to_string(result.status)
                                          : "killed by signal " + std::to_string(result.status);
    return how + "\n--- stdout ---\n" + result.out + "--- stderr ---\n" + result.err;
}

}  // namespace cli_test
