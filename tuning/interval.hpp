// The 95% interval of a speed ratio from paired rounds. Each round times both sides once, in
// turn, so a change in the machine's load between rounds moves both alike: the round's log of
// default time / pick time is one sample, and the interval is Student's t interval over those
// samples (their mean +- t(0.975, n - 1) x their standard deviation / sqrt(n)), exponentiated.
// Logs make the interval of a ratio symmetric in its direction (1.05x faster is the negative of
// 1.05x slower); a disturbed round widens it rather than moving it far.
#pragma once

#include <vector>

namespace magi2norm::tuning {

struct RatioInterval {
    double estimate = 1;  // exp(mean log ratio): the geometric mean of the rounds' ratios
    double lower = 0, upper = 0;  // the 95% interval (0 and infinity with fewer than 2 rounds)
    int rounds = 0;
};

// Student's t quantile at 0.975 for `df` degrees of freedom (df >= 1).
double t_quantile_975(int df);

RatioInterval ratio_interval(const std::vector<double> &log_ratios);

}  // namespace magi2norm::tuning
