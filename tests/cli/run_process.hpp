// Runs a program as a child process and collects how it ended and what it printed, so the
// tests can tell an orderly error exit from a crash.
#pragma once

#include <string>
#include <vector>

namespace cli_test {

struct ProcessResult {
    bool exited = false;  // false: killed by a signal (a crash)
    int status = -1;      // the exit status when exited, else the signal number
    std::string out, err;
};

// A child started and not yet waited for.
struct Process {
    int pid = -1;
    std::string out_path, err_path;
};

// argv[0] is the program's path; stdout and stderr go through files in `scratch_dir`; `env`
// ("NAME=value") adds to the environment.
Process start_process(const std::vector<std::string> &argv, const std::string &scratch_dir,
                      const std::vector<std::string> &env = {});
ProcessResult wait_process(const Process &process);
ProcessResult run_process(const std::vector<std::string> &argv, const std::string &scratch_dir);

// "exit 1" or "killed by signal 11", plus both streams, for assertion messages.
std::string describe(const ProcessResult &result);

}  // namespace cli_test
