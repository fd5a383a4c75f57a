// The search strategy over the hand schedule's knobs, apart from how a configuration is timed:
// coordinate descent from a start, then seeded restarts (the incumbent with two knobs at random
// values), each restart that beats the incumbent descended from in turn.
//
// Coordinate descent suits this space: few knobs, each with a handful of ordered values, whose
// effects are nearly separable (task sizes for small calls, memory tasks for large ones, chunks
// for tokens of many rows), so one pass costs the sum of the knobs' value counts where a grid
// costs their product; the restarts leave a pass's local optimum where two knobs interact.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "knob_space.hpp"

namespace magi2norm::tuning {

// A configuration's verdict against the incumbent, timed in the same rounds.
struct Outcome {
    bool ok = false;               // measured (not rejected)
    double vs_incumbent = 1;       // its time over the incumbent's (geometric mean over the cases)
    bool worse_somewhere = false;  // slower than the shipped default on a case, beyond the noise
    double noise = 0;              // the spread of two runs of one schedule in those rounds
    double score = 1;              // its time over the shipped default's
    std::string id;                // its record entry
};

struct StrategyCalls {
    // The knobs worth trying from a configuration (those that can change the class's calls).
    std::function<std::vector<std::string>(const Config &)> knobs_of;
    // Times `tries` against the incumbent (none: the shipped default), in order, as far as the
    // budget goes; one Outcome per configuration timed.
    std::function<std::vector<Outcome>(const std::vector<Config> &tries, const Config *incumbent)> evaluate;
    // Whether the budget has time for another evaluation.
    std::function<bool()> time_left;
    // Told of each new incumbent.
    std::function<void(const Config &, const Outcome &)> on_incumbent;
};

struct StrategyResult {
    Config best;              // the start when nothing beat it
    bool moved = false;       // whether anything beat the start
    Outcome outcome;          // the best's last verdict (meaningful when moved)
};

// A try replaces the incumbent when it is measured, slower than the default nowhere, and faster
// than the incumbent by more than its noise (and at least 1%).
bool beats_incumbent(const Outcome &o);

// `start_outcome`: `start` already beat the shipped default with this verdict (a neighbouring
// class's best, or this class's best from an earlier visit), so it is the incumbent from the
// outset; null: `start` is the shipped default.
StrategyResult coordinate_search(const Config &start, const StrategyCalls &calls, std::uint64_t seed,
                                 const Outcome *start_outcome = nullptr);

}  // namespace magi2norm::tuning
