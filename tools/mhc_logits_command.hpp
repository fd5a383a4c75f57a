// magi2-norm mhc-logits: the mHC logits of a safetensors file (RMSNorm::mhc_logits).
#pragma once

#include <string>
#include <vector>

namespace magi2norm::cli {

// Returns the exit status; throws UsageError or magi2norm::Error.
int run_mhc_logits(const std::vector<std::string> &args);

}  // namespace magi2norm::cli
