// Confirmation of the search's picks. The search compares hundreds of candidates, each once,
// and keeps the best: among many near-equal candidates the best-looking one is mostly the one
// the noise favoured (the winner's curse), and its measured win does not come back. So when the
// search ends, each class's pick and the shipped default are timed again in fresh interleaved
// rounds, in a process of their own (magi2-tune-measure --confirm, which magi2-tune runs): no
// buffer, warm cache or allocator layout of the search carries over. The default side is made as
// the pick is, a candidate of the default knobs (the same generator run, single-target shared
// object and loading), not the library's own multi-target static variant: the build makes both
// sides alike, so here too they differ by their knobs alone. The pick ships only where the 95%
// interval of its speedup over the default (interval.hpp: a t interval over the rounds' log
// ratios, each round's ratio the mean log over the class's cases) lies above 1 and no case of
// the class is confirmed slower (its own interval below 1). Every other class ships the
// default: the build makes no variant for it.
#pragma once

#include <string>
#include <vector>

#include "compile.hpp"
#include "record.hpp"

namespace magi2norm::tuning {

// One case's confirmation rounds: seconds a call, one entry a round, both sides timed in each.
struct CaseRounds {
    std::string case_id;
    std::vector<double> default_s, pick_s;
};

// The verdict on a class from its cases' rounds (rounds paired by index, as many as the case
// with the fewest); its status starts with "shipped" when the pick ships.
Confirmation judge(const std::vector<CaseRounds> &cases);
bool ships(const Confirmation &c);

struct ConfirmOptions {
    double seconds = 60;   // for all the classes together; each gets an even share of what is left
    int min_rounds = 10;   // rounds a class gets however long they take
    int max_rounds = 400;  // rounds a class gets however short they are
};

// Confirms each CPU class of `record` with a pick (loading its variants from the compiler's
// cache by the names the search recorded, and the defaults' from there or made anew) and sets
// its confirmation and `significant`; a class without a pick gets `significant` false. Prints
// each verdict.
void confirm_picks(Record &record, Compiler &compiler, const ConfirmOptions &options);

}  // namespace magi2norm::tuning
