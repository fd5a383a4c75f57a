#include "copy_bandwidth.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "best_time.hpp"

namespace magi2norm::cli {

double CopyBandwidth::gbps(std::size_t traffic_bytes, int repeats) {
    if (const auto it = measured_.find(traffic_bytes); it != measured_.end()) return it->second;
    // A copy of N bytes reads N and writes N.
    const std::size_t size = std::max<std::size_t>(traffic_bytes / 2, 64);
    const std::size_t pairs = std::max<std::size_t>(1, kDramFootprint / (2 * size));
    if (pool_.size() < 2 * size * pairs) {
        pool_ = std::vector<unsigned char>();  // release the old pool before taking the new one
        pool_.resize(2 * size * pairs);
    }
    unsigned char *const base = pool_.data();

    // Each thread copies its slice of every pair, so threads start once per round.
    auto round = [&] {
        std::vector<std::thread> workers;
        const std::size_t slice = (size + threads_ - 1) / threads_;
        for (int t = 0; t < threads_; ++t) {
            const std::size_t begin = std::min(size, t * slice), end = std::min(size, begin + slice);
            workers.emplace_back([=] {
                for (std::size_t i = 0; i < pairs; ++i) {
                    unsigned char *const source = base + 2 * size * i;
                    std::memcpy(source + size + begin, source + begin, end - begin);
                }
            });
        }
        for (std::thread &w : workers) w.join();
    };
    const double seconds = best_seconds(repeats, round);
    return measured_[traffic_bytes] = 2.0 * static_cast<double>(size) * static_cast<double>(pairs) / seconds / 1e9;
}

}  // namespace magi2norm::cli
