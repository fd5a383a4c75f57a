// The search, one shape class at a time under a shared time budget.
//
// The classes share the budget by successive halving (halving.hpp): every class is visited
// with an even share, then the half with the largest expected gain is visited again for twice
// as long, and so on. On its first visit, strategy `coordinate` (the default) measures Halide's
// three autoschedulers at the class's own estimates; then (every visit) coordinate descent over
// the hand schedule's knobs that can change the class's calls: each legal value of one knob in
// turn (compiled together), the best kept when it beats the incumbent by more than the noise,
// until a pass changes nothing; then restarts from seeded random configurations while the
// visit's share lasts (strategy.hpp says why). A first visit starts from the best of the
// nearest class already searched (same dtypes, then same row bucket, then nearest bytes) where
// that beats the defaults here; a later visit from the class's own best. Every first visit
// measures at least kMinCandidates knob schedules, however short its share.
//
// Then the runtime knobs (tune_runtime), with what is left of the budget (a twentieth is kept
// for them). What follows the search (the confirmation, confirm.hpp) is given
// `reserve_seconds` of the budget.
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
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compile.hpp"
#include "halving.hpp"
#include "record.hpp"
#include "strategy.hpp"

namespace magi2norm::tuning {

struct SearchOptions {
    double budget_seconds = 1200;
    std::uint64_t seed = 1;
    int rounds = 7;
    std::string strategy = "coordinate";
    Backend backend = Backend::cpu;
    std::string record_path;  // saved after every class; a run resumes from it
    double reserve_seconds = 0;  // of budget_seconds, kept for what follows the search
};

// Knob schedules (the autoschedulers' aside) a class's first visit measures however short its share.
constexpr int kMinCandidates = 3;

class Search {
public:
    Search(SearchOptions options, Compiler &compiler, Record &record);
    // Tunes every class of the record's cases; prints its progress.
    void run();

private:
    struct ClassRun;
    struct Evaluated;
    // `seconds`: the visit's share of the budget, from the end of its setup; `visit`: 0 for the
    // first. Returns the class's progress for the halving.
    ClassProgress tune_class(const ShapeClass &klass, const std::vector<const TuneCase *> &cases, double seconds, int visit);
    // Makes (or finds in the compiler's cache) the kernels of `schedules` for every case; each
    // new schedule's compile seconds by its key.
    std::map<std::string, double> build(ClassRun &run, const std::vector<Schedule> &schedules);
    // Measures `schedules` (built first, together) against the library's variant and
    // `incumbent` in the same rounds, as far as the visit's time goes; one verdict a schedule,
    // a schedule measured before taken from the record.
    std::vector<Evaluated> evaluate(ClassRun &run, const std::vector<Schedule> &schedules, const Schedule *incumbent,
                                    const std::string &strategy);
    // One new schedule: its bits checked, then timed; its entry appended to the record.
    Evaluated measure_new(ClassRun &run, const Schedule &s, const Schedule *incumbent, double compile_seconds,
                          const std::string &strategy);
    // The strategy's view of the class: its knobs, evaluate, the time left.
    StrategyCalls strategy_calls(ClassRun &run);
    // Where the descent starts: the class's own best from an earlier visit; else, on a first
    // visit, the best of the nearest class searched before, where it beats the defaults here
    // (timed against them, `start_outcome` its verdict); else the defaults (nullopt).
    std::optional<Config> descent_start(ClassRun &run, const StrategyCalls &calls, Outcome &start_outcome);
    // The search's pick into the class's result, unconfirmed.
    static void keep_pick(ClassResult &result, const StrategyResult &found);
    // The halving's view of the visit: its gain and how much of a first pass is untried.
    ClassProgress progress_of(const ClassRun &run, const StrategyResult &found) const;
    // The visit's spend added to the class's result, which replaces the record's.
    ClassProgress finish_class(ClassRun &run, ClassProgress progress);
    // The runtime knobs: streaming_min_output_bytes from the calls whose output sizes it can
    // split (each call timed with ordinary and with streaming stores, followed by a read of its
    // output); the row-regrouping limits only where a case is regrouped.
    void tune_runtime(double deadline);

    SearchOptions options_;
    Compiler &compiler_;
    Record &record_;
};

}  // namespace magi2norm::tuning
