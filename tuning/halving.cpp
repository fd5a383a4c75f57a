#include "halving.hpp"

#include <algorithm>

namespace magi2norm::tuning {

double expected_gain(const ClassProgress &p) { return std::max(p.gain, 0.0) + kExploreGain * std::clamp(p.untried, 0.0, 1.0); }

std::vector<std::size_t> rung_sizes(std::size_t n) {
    std::vector<std::size_t> sizes = {n};
    while (sizes.back() > 1) sizes.push_back((sizes.back() + 1) / 2);
    return sizes;
}

std::vector<std::size_t> survivors(const std::vector<ClassProgress> &progress, const std::vector<std::size_t> &alive,
                                   std::size_t keep) {
    std::vector<std::size_t> order(alive.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return expected_gain(progress[alive[a]]) > expected_gain(progress[alive[b]]);
    });
    order.resize(std::min(keep, order.size()));
    std::sort(order.begin(), order.end());
    std::vector<std::size_t> kept;
    for (const std::size_t i : order) kept.push_back(alive[i]);
    return kept;
}

std::vector<std::vector<std::size_t>> successive_halving(
    std::size_t n, double end, const std::function<double()> &now,
    const std::function<ClassProgress(std::size_t, double, int)> &visit) {
    const std::vector<std::size_t> sizes = rung_sizes(n);
    std::vector<ClassProgress> progress(n);
    std::vector<std::size_t> alive(n);
    for (std::size_t i = 0; i < n; ++i) alive[i] = i;
    std::vector<std::vector<std::size_t>> rungs;
    for (std::size_t rung = 0; rung < sizes.size() && alive.size() > 0; ++rung) {
        if (rung > 0) {
            if (now() >= end) break;
            alive = survivors(progress, alive, sizes[rung]);
        }
        rungs.emplace_back();
        const double rung_end = now() + std::max(0.0, end - now()) / static_cast<double>(sizes.size() - rung);
        for (std::size_t j = 0; j < alive.size(); ++j) {
            if (rung > 0 && now() >= end) break;
            const double share = std::max(0.0, (rung_end - now()) / static_cast<double>(alive.size() - j));
            progress[alive[j]] = visit(alive[j], share, static_cast<int>(rung));
            rungs.back().push_back(alive[j]);
        }
    }
    return rungs;
}

}  // namespace magi2norm::tuning
