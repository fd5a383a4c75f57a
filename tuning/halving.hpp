// How the search's budget is shared among the shape classes: successive halving. Every class is
// visited in the first rung with an even share; after each rung the half with the largest
// expected gain goes on to the next, whose visits are twice as long, until one class is left
// (n, ceil(n/2), ..., 1 classes: each rung spends the same time in all).
//
// Why halving and not a bandit that picks one class at a time: a class's visit starts with its
// setup (a from-memory class fills GBs of buffers, seconds each time), so visits must be few and
// long; and a gain is only evidence once every class has had a first look with the same share.
// A class's expected gain from more search is the gain of its best so far over the shipped
// default (what a search that found something tends to find more of), plus kExploreGain for the
// part of its first descent pass not yet measured (a class cut short before its first pass ended
// has not been looked at).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace magi2norm::tuning {

// The smallest win the search accepts (1%): what an unexplored pass is worth.
constexpr double kExploreGain = 0.01;

struct ClassProgress {
    double gain = 0;     // 1 - the best's time over the default's (0 when nothing beat it)
    double untried = 1;  // the fraction of its first descent pass not measured yet, in [0, 1]
};

double expected_gain(const ClassProgress &p);

// The number of classes in each rung: n, ceil(n / 2), ..., 1 (one rung for n <= 1).
std::vector<std::size_t> rung_sizes(std::size_t n);

// The `keep` classes of `alive` (indices into `progress`) with the largest expected gain, in
// their order in `alive`; ties go to the earlier class.
std::vector<std::size_t> survivors(const std::vector<ClassProgress> &progress, const std::vector<std::size_t> &alive,
                                   std::size_t keep);

// Runs the halving over `n` classes until `end` (on the clock `now`): each rung's time is an even
// part of what is left for the rungs to come, shared evenly by its classes, a share computed
// when its visit starts (a visit that overruns is taken from the shares after it). `visit(i,
// share, rung)` visits class i and returns its progress. Every class is visited in the first
// rung, however little time is left; a later rung starts only before `end`. Returns the classes
// of each rung that ran.
std::vector<std::vector<std::size_t>> successive_halving(
    std::size_t n, double end, const std::function<double()> &now,
    const std::function<ClassProgress(std::size_t, double, int)> &visit);

}  // namespace magi2norm::tuning
