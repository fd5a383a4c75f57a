// The demo's correctness check: a sample of output rows against a plain scalar evaluation of
// SPEC.md's formula, under SPEC.md's gates.
#pragma once

#include "demo_cases.hpp"

namespace magi2norm::cli {

struct CheckResult {
    bool pass = true;
    double max_abs_err = 0;  // against the reference's output in the output dtype
};

// Checks every row of `sample_tokens` tokens spread evenly over T: an FP32 output within
// rtol = atol = 1e-6 of the reference, a BF16 output within one local BF16 ULP of it.
CheckResult check_sampled_rows(const DemoCase &c, const DemoData &data, const void *out, int sample_tokens);

}  // namespace magi2norm::cli
