#include "strategy.hpp"

#include <algorithm>
#include <random>

namespace magi2norm::tuning {

bool beats_incumbent(const Outcome &o) { return o.ok && !o.worse_somewhere && o.vs_incumbent < 1 - std::max(o.noise, 0.01); }

StrategyResult coordinate_search(const Config &start, const StrategyCalls &calls, std::uint64_t seed,
                                 const Outcome *start_outcome) {
    StrategyResult result;
    result.best = start;
    if (start_outcome) {
        result.moved = true;
        result.outcome = *start_outcome;
    }
    const auto take = [&](const Config &config, const Outcome &outcome) {
        result.best = config;
        result.moved = true;
        result.outcome = outcome;
        if (calls.on_incumbent) calls.on_incumbent(config, outcome);
    };
    const auto incumbent = [&]() -> const Config * { return result.moved ? &result.best : nullptr; };

    // Each knob's other values in turn, the best try kept, until a pass changes nothing.
    const auto descend = [&] {
        for (bool changed = true; changed && calls.time_left();) {
            changed = false;
            for (const std::string &name : calls.knobs_of(result.best)) {
                if (!calls.time_left()) break;
                std::vector<Config> tries;
                for (const std::int64_t v : knob(name).values) {
                    if (v == result.best.at(name)) continue;
                    Config c = result.best;
                    c[name] = v;
                    tries.push_back(c);
                }
                const std::vector<Outcome> outcomes = calls.evaluate(tries, incumbent());
                int best = -1;
                for (std::size_t i = 0; i < outcomes.size(); ++i) {
                    if (beats_incumbent(outcomes[i]) && (best < 0 || outcomes[i].vs_incumbent < outcomes[best].vs_incumbent)) {
                        best = static_cast<int>(i);
                    }
                }
                if (best >= 0) {
                    take(tries[best], outcomes[best]);
                    changed = true;
                }
            }
        }
    };
    descend();
    std::mt19937_64 rng(seed);
    for (int same = 0; calls.time_left() && same < 1000;) {
        // Two knobs of the incumbent at random values: near a good incumbent a whole random
        // point almost never wins, a pair that a one-knob pass cannot move together may.
        Config restart = result.best;
        const std::vector<std::string> names = calls.knobs_of(result.best);
        if (names.empty()) break;
        for (int k = 0; k < 2; ++k) {
            const std::string &name = names[rng() % names.size()];
            const auto &values = knob(name).values;
            restart[name] = values[rng() % values.size()];
        }
        if (restart == result.best) {
            ++same;  // no knob with a second value: nothing to restart from
            continue;
        }
        same = 0;
        const std::vector<Outcome> outcomes = calls.evaluate({restart}, incumbent());
        if (!outcomes.empty() && beats_incumbent(outcomes[0])) {
            take(restart, outcomes[0]);
            descend();
        }
    }
    return result;
}

}  // namespace magi2norm::tuning
