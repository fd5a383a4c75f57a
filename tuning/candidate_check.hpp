// A candidate's bits check: before it is timed, a schedule runs on every case of its class and
// must give the library's own variant's bits. On the CPU it runs in a child process, so that a
// candidate that faults or hangs is rejected instead of ending the search.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench.hpp"

namespace magi2norm::tuning {

// The cases of a class with their benches and the library's output on each.
struct ClassCases {
    std::vector<const TuneCase *> cases;
    std::vector<std::unique_ptr<CaseBench>> benches;
    std::vector<std::vector<unsigned char>> expected;
};

// "ok" when `kernels` (one per case) give the expected bits on every case; else "rejected: "
// and why (its output differs on a named case, it faulted, its check did not end in 120 s).
std::string check_candidate(ClassCases &cases, const std::vector<detail::KernelEntry> &kernels, Backend backend);

}  // namespace magi2norm::tuning
