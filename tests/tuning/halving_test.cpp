// The budget's sharing among classes (tuning/halving.hpp) on a made-up clock: every class gets a
// first visit, the classes with the largest expected gain go on with longer visits, and the
// whole stays within the budget.
#include <gtest/gtest.h>

#include <map>

#include "halving.hpp"

namespace {

using namespace magi2norm::tuning;

TEST(Halving, RungsHalveToOneClass) {
    EXPECT_EQ(rung_sizes(18), (std::vector<std::size_t>{18, 9, 5, 3, 2, 1}));
    EXPECT_EQ(rung_sizes(2), (std::vector<std::size_t>{2, 1}));
    EXPECT_EQ(rung_sizes(1), (std::vector<std::size_t>{1}));
}

TEST(Halving, TheLargestExpectedGainsGoOn) {
    std::vector<ClassProgress> p(5);
    p[0].gain = 0.02;
    p[0].untried = 0;
    p[1].gain = 0;
    p[1].untried = 1;  // nothing found, its first pass not measured: worth the 1% it may find
    p[2].gain = 0.10;
    p[2].untried = 0;
    p[3].gain = 0;
    p[3].untried = 0;  // searched and nothing found
    p[4].gain = 0.005;
    p[4].untried = 0.5;
    EXPECT_DOUBLE_EQ(expected_gain(p[1]), kExploreGain);
    EXPECT_DOUBLE_EQ(expected_gain(p[4]), 0.01);
    EXPECT_EQ(survivors(p, {0, 1, 2, 3, 4}, 2), (std::vector<std::size_t>{0, 2}));
    EXPECT_EQ(survivors(p, {0, 1, 2, 3, 4}, 3), (std::vector<std::size_t>{0, 1, 2}));  // 1 and 4 tie: the earlier
    EXPECT_EQ(survivors(p, {3, 1}, 1), (std::vector<std::size_t>{1}));
}

TEST(Halving, EveryClassIsVisitedAndTheBudgetGoesWhereTheGainIs) {
    // 18 classes (the model's), 900 s; visits take their share, plus 2 s of setup; class 7 and
    // class 12 find gains, the others nothing after their first pass.
    double clock = 0;
    std::map<std::size_t, double> seconds;
    std::map<std::size_t, int> visits;
    const auto rungs = successive_halving(18, 900, [&] { return clock; }, [&](std::size_t i, double share, int) {
        clock += share + 2;
        seconds[i] += share + 2;
        ++visits[i];
        ClassProgress p;
        p.untried = 0;
        p.gain = i == 7 ? 0.08 : i == 12 ? 0.03 : 0;
        return p;
    });
    ASSERT_GE(rungs.size(), 2u);
    EXPECT_EQ(rungs[0].size(), 18u);
    for (std::size_t i = 0; i < 18; ++i) EXPECT_GE(visits[i], 1) << "class " << i;
    // The classes that found something are in every later rung, and get the most time.
    for (std::size_t r = 1; r < rungs.size(); ++r) {
        EXPECT_NE(std::find(rungs[r].begin(), rungs[r].end(), 7), rungs[r].end()) << "rung " << r;
    }
    EXPECT_EQ(rungs.back(), (std::vector<std::size_t>{7}));
    for (std::size_t i = 0; i < 18; ++i) {
        if (i != 7) EXPECT_GT(seconds[7], seconds[i]) << "class " << i;
        if (i != 7 && i != 12) EXPECT_GT(seconds[12], seconds[i]) << "class " << i;
    }
    // Within the budget but for the setups of the rungs' last visits.
    EXPECT_LE(clock, 900 + 2 * rungs.size());
}

TEST(Halving, AnOverrunBudgetStillVisitsEveryClassOnce) {
    double clock = 0;
    int calls = 0;
    const auto rungs = successive_halving(5, 10, [&] { return clock; }, [&](std::size_t, double, int) {
        clock += 30;  // each setup alone is past the budget
        ++calls;
        return ClassProgress{};
    });
    EXPECT_EQ(calls, 5);
    EXPECT_EQ(rungs.size(), 1u);
}

}  // namespace
