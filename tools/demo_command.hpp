// `magi2-norm demo [--tokens T] [--threads N] [--json]`: times and checks the model's norms.
#pragma once

#include <string>
#include <vector>

namespace magi2norm::cli {

// Returns 0 when every check passes, 1 otherwise; throws UsageError or magi2norm::Error.
int run_demo(const std::vector<std::string> &args);

}  // namespace magi2norm::cli
