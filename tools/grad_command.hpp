// `magi2-norm grad IN OUT [flags]`: the backward of the norm on the tensors of a safetensors file.
#pragma once

#include <string>
#include <vector>

namespace magi2norm::cli {

// Returns the exit status; throws UsageError or magi2norm::Error.
int run_grad(const std::vector<std::string> &args);

}  // namespace magi2norm::cli
