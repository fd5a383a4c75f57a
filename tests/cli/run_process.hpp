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

// argv[0] is the program's path; stdout and stderr go through files in `scratch_dir`.
ProcessResult run_process(const std::vector<std::string> &argv, const std::string &scratch_dir);

// "exit 1" or "killed by signal 11", plus both streams, for assertion messages.
std::string describe(const ProcessResult &result);

}  // namespace cli_test
