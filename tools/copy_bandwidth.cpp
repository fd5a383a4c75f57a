#include "copy_bandwidth.hpp"

#include <algorithm>

namespace magi2norm::cli {

double CopyBandwidth::gbps(std::size_t traffic_bytes, int repeats) {
    if (const auto it = measured_.find(traffic_bytes); it != measured_.end()) return it->second;
    measure::CopyRun run;
    run.kind = measure::CopyKind::memcpy;
    run.bytes = std::max<std::size_t>(traffic_bytes / 2, 64);  // a copy of N bytes reads N and writes N
    run.pairs = std::max<std::size_t>(1, kDramFootprint / (2 * run.bytes));
    run.threads = threads_;
    run.runs = repeats;
    run.summary = measure::Summary::best;
    return measured_[traffic_bytes] = meter_.bytes_per_second(run) / 1e9;
}

}  // namespace magi2norm::cli
