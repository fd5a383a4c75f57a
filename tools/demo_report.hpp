// The demo's output: a human-readable table, or one JSON object per line (--json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "demo_cases.hpp"
#include "row_check.hpp"

namespace magi2norm::cli {

struct CaseResult {
    const DemoCase *demo_case;
    double seconds;       // best forward time
    std::uint64_t bytes;  // input read once + output written once + scales (+ token ids)
    double copy_gbps;     // memcpy bandwidth for the same traffic and threads
    CheckResult check;
    std::string variant;  // the AOT variant the timed calls ran (last_variant())
};

void print_table_header(std::int64_t tokens, int threads);
void print_table_row(const CaseResult &r);
void print_json_line(const CaseResult &r, int threads);

}  // namespace magi2norm::cli
