// The confirmation's interval and verdict (tuning/interval.hpp, tuning/confirm.hpp) on
// synthetic timings with known truths: a search's noisy winner is dropped, a real win ships, a
// case confirmed slower keeps the default, and a load that moves both sides of a round cancels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "confirm.hpp"
#include "interval.hpp"
#include "strategy.hpp"

namespace {

using namespace magi2norm::tuning;

TEST(Interval, StudentsQuantiles) {
    EXPECT_NEAR(t_quantile_975(1), 12.706, 1e-3);
    EXPECT_NEAR(t_quantile_975(9), 2.262, 1e-3);
    EXPECT_NEAR(t_quantile_975(30), 2.042, 1e-3);
    EXPECT_NEAR(t_quantile_975(40), 2.0211, 2e-4);
    EXPECT_NEAR(t_quantile_975(120), 1.9799, 2e-4);
    EXPECT_GT(t_quantile_975(31), 1.96);
    EXPECT_LT(t_quantile_975(31), t_quantile_975(30));
}

TEST(Interval, ATIntervalOverTheRoundsLogRatios) {
    // Mean 0.2, standard deviation 0.1 over 3 rounds: 0.2 +- 4.303 x 0.1 / sqrt(3).
    const RatioInterval r = ratio_interval({0.1, 0.2, 0.3});
    const double half = 4.303 * 0.1 / std::sqrt(3.0);
    EXPECT_EQ(r.rounds, 3);
    EXPECT_NEAR(r.estimate, std::exp(0.2), 1e-12);
    EXPECT_NEAR(r.lower, std::exp(0.2 - half), 1e-9);
    EXPECT_NEAR(r.upper, std::exp(0.2 + half), 1e-9);
    const RatioInterval one = ratio_interval({0.5});
    EXPECT_EQ(one.lower, 0);
    EXPECT_TRUE(std::isinf(one.upper));
}

// A side's time in one round: its true time, times the round's load (shared by both sides of
// a round), times its own noise.
struct Timings {
    std::mt19937_64 rng{11};
    double noise = 0.03, load = 0;

    std::pair<double, double> round(double default_s, double pick_s) {
        std::normal_distribution<double> n(0, noise), l(0, load);
        const double shared = std::exp(l(rng));
        return {default_s * shared * std::exp(n(rng)), pick_s * shared * std::exp(n(rng))};
    }
    CaseRounds rounds(const std::string &id, double default_s, double pick_s, int count) {
        CaseRounds c{id, {}, {}};
        for (int i = 0; i < count; ++i) {
            const auto [d, p] = round(default_s, pick_s);
            c.default_s.push_back(d);
            c.pick_s.push_back(p);
        }
        return c;
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

TEST(Confirmation, DropsTheSearchsNoisyWinner) {
    // 80 candidates, every one as fast as the default, each compared once over 7 rounds as the
    // search does: the best-looking one "wins" by the noise alone.
    Timings t;
    double best = 1;
    for (int c = 0; c < 80; ++c) {
        const CaseRounds r = t.rounds("pre_norm/bf16_bf16/M1/T16", 1e-5, 1e-5, 7);
        best = std::min(best, median(r.pick_s) / median(r.default_s));
    }
    ASSERT_LT(best, 0.98) << "the synthetic search should be fooled";
    // Fresh rounds of that pick against the default.
    const Confirmation c = judge({t.rounds("pre_norm/bf16_bf16/M1/T16", 1e-5, 1e-5, 30)});
    EXPECT_FALSE(ships(c)) << c.status;
    EXPECT_LE(c.speedup.lower, 1);
    EXPECT_GE(c.speedup.upper, 1);
    EXPECT_EQ(c.speedup.rounds, 30);
    EXPECT_NE(c.status.find("does not lie above 1"), std::string::npos) << c.status;
}

// The search itself (coordinate_search) on a synthetic cost with a known optimum, measured as
// the search measures (medians of 7 noisy rounds against the incumbent, a noise estimate that
// says 0.5% where each sample varies by 4%): every configuration costs 1 but one, which costs
// 0.97. Whatever the search picks, fresh rounds ship it exactly when it is that one.
TEST(Confirmation, ShipsTheSearchsPickOnlyWhenItIsTheTrueOptimum) {
    int noise_picks = 0, optimum_picks = 0;
    for (const std::uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8}) {
        Timings t;
        t.rng.seed(seed);
        t.noise = 0.04;
        const auto cost = [](const Config &c) { return c.at("cpu_chunk_bytes") == 4096 ? 0.97e-5 : 1e-5; };
        StrategyCalls calls;
        calls.knobs_of = [](const Config &) {
            return std::vector<std::string>{"cpu_task_bytes", "cpu_split_bytes", "cpu_chunk_bytes", "cpu_vector_width"};
        };
        int evaluations = 0;
        calls.time_left = [&] { return evaluations < 60; };
        calls.evaluate = [&](const std::vector<Config> &tries, const Config *incumbent) {
            const Config base = incumbent ? *incumbent : default_config(Scope::cpu);
            std::vector<Outcome> outcomes;
            for (const Config &c : tries) {
                ++evaluations;
                const CaseRounds r = t.rounds("case", cost(base), cost(c), 7);
                const CaseRounds d = t.rounds("case", 1e-5, cost(c), 7);
                Outcome o;
                o.ok = true;
                o.vs_incumbent = median(r.pick_s) / median(r.default_s);
                o.score = median(d.pick_s) / median(d.default_s);
                o.noise = 0.005;
                outcomes.push_back(o);
            }
            return outcomes;
        };
        const StrategyResult found = coordinate_search(default_config(Scope::cpu), calls, seed);
        if (!found.moved) continue;
        const bool optimum = found.best.at("cpu_chunk_bytes") == 4096;
        (optimum ? optimum_picks : noise_picks) += 1;
        const Confirmation c = judge({t.rounds("case", 1e-5, cost(found.best), 40)});
        EXPECT_EQ(ships(c), optimum) << "seed " << seed << ": " << describe(found.best) << ": " << c.status;
    }
    // The synthetic search is fooled by the noise for some seeds and finds the optimum for others.
    EXPECT_GT(noise_picks, 0);
    EXPECT_GT(optimum_picks, 0);
}

TEST(Confirmation, ShipsARealWinWithItsInterval) {
    Timings t;
    const Confirmation c = judge({t.rounds("a", 1e-5, 0.95e-5, 20), t.rounds("b", 2e-3, 1.9e-3, 20)});
    EXPECT_TRUE(ships(c)) << c.status;
    EXPECT_GT(c.speedup.lower, 1);
    EXPECT_LT(c.speedup.lower, 1 / 0.95);
    EXPECT_GT(c.speedup.upper, 1 / 0.95);
    EXPECT_EQ(c.cases.size(), 2u);
    EXPECT_EQ(c.status.rfind("shipped: ", 0), 0u) << c.status;
}

TEST(Confirmation, KeepsTheDefaultWhereACaseIsConfirmedSlower) {
    // Faster over the class on the whole (a 15% win and a 4% loss), but slower on one case.
    Timings t;
    t.noise = 0.01;
    const Confirmation c = judge({t.rounds("fast", 1e-5, 0.85e-5, 20), t.rounds("slow", 1e-5, 1.04e-5, 20)});
    EXPECT_GT(c.speedup.lower, 1);
    EXPECT_FALSE(ships(c)) << c.status;
    EXPECT_NE(c.status.find("slower on slow"), std::string::npos) << c.status;
}

TEST(Confirmation, PairedRoundsCancelALoadThatMovesBothSides) {
    // A shared machine's load moves each round by +-30%, far more than the 3% win: the rounds'
    // ratios hold the win.
    Timings t;
    t.noise = 0.005;
    t.load = 0.3;
    const Confirmation c = judge({t.rounds("a", 1e-3, 0.97e-3, 15)});
    EXPECT_TRUE(ships(c)) << c.status;
    EXPECT_LT(c.speedup.upper / c.speedup.lower, 1.02);
}

TEST(Confirmation, FewerThanTwoRoundsShipNothing) {
    const Confirmation c = judge({CaseRounds{"a", {2.0}, {1.0}}});
    EXPECT_FALSE(ships(c));
}

}  // namespace
