// magi2-norm as a function: the program's main and the fuzz target of tests/fuzz run it.
#pragma once

#include <string>
#include <vector>

namespace magi2norm::cli {

// Runs the command line `args` (the program name left out), printing to stdout and stderr, and
// returns the exit status: 0, 1 for library and file errors, 2 for command-line mistakes (with
// the usage). Never throws.
int run_cli(const std::vector<std::string> &args);

}  // namespace magi2norm::cli
