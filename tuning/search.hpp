// The search, one shape class at a time under a shared time budget.
//
// Strategy `coordinate` (the default): Halide's three autoschedulers at the class's own
// estimates, then coordinate descent over the hand schedule's knobs that can change the class's
// calls, from the shipped defaults: each legal value of one knob in turn (compiled together),
// the best kept when it beats the incumbent by more than the noise, until a pass changes
// nothing; then restarts from seeded random configurations while the class's share of the
// budget lasts (strategy.hpp says why).
//
// Then the runtime knobs (tune_runtime), with what is left of the budget (a twentieth is kept
// for them).
//
// Strategy `adams2019-sampling` is the anchor: Adams2019's beam search, then random-dropout
// samples (beam 1, dropout 90, seeds 1, 2, ...) as Halide's autotune loop draws them, the best
// kept, under the same budget.
//
// Every schedule is first run in a child process on every case of its class and must give the
// bits of the library's own variant; one that differs, fails Halide's checks or faults is
// recorded as rejected and never picked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile.hpp"
#include "record.hpp"

namespace magi2norm::tuning {

struct SearchOptions {
    double budget_seconds = 1200;
    std::uint64_t seed = 1;
    int rounds = 7;
    std::string strategy = "coordinate";
    Backend backend = Backend::cpu;
    std::string record_path;  // saved after every class; a run resumes from it
};

class Search {
public:
    Search(SearchOptions options, Compiler &compiler, Record &record);
    // Tunes every class of the record's cases; prints its progress.
    void run();

private:
    struct ClassRun;
    // `seconds`: the class's share of the budget, from the end of its setup.
    void tune_class(const ShapeClass &klass, const std::vector<const TuneCase *> &cases, double seconds);
    // The runtime knobs: streaming_min_output_bytes from the calls whose output sizes it can
    // split (each call timed with ordinary and with streaming stores, followed by a read of its
    // output); the row-regrouping limits only where a case is regrouped.
    void tune_runtime(double deadline);

    SearchOptions options_;
    Compiler &compiler_;
    Record &record_;
};

}  // namespace magi2norm::tuning
