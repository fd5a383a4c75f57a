// The tuning record: the keys a build checks it against, the runtime knobs, and each shape
// class's pick with its confirmation (docs/tuning_record.md describes the file). Beside it, the
// search's log (search_log_path) holds every measured schedule with its times on every case it
// ran; a run resumes from both: what was measured is not measured again.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cases.hpp"
#include "compile.hpp"
#include "interval.hpp"
#include "machine.hpp"

namespace magi2norm::tuning {

// One schedule on one case, from interleaved rounds with the library's own variant.
struct CaseTimes {
    double library_s = 0;   // median seconds a call, the library's variant (the shipped default)
    double schedule_s = 0;  // median seconds a call, this schedule
    double noise = 0;       // |median of one run of the library's variant / the other's - 1|
    double copy_gbps = 0;   // median, the copy of the same bytes measured in the same rounds
    int rounds = 0;
    double ratio() const { return schedule_s / library_s; }
};

struct Measured {
    std::string id;          // "bf16_bf16/d4096/b4M#7"
    std::string class_name;
    std::string strategy;    // which search made it: coordinate | knobs | adams2019-sampling | autoschedulers
    Schedule schedule;
    std::string status = "ok";  // or why it was rejected
    double compile_seconds = 0;
    std::map<std::string, CaseTimes> cases;  // case id -> times
    // A schedule made here and measured elsewhere (GPU bundles): its variant's cache name per case,
    // and status "pending" until it has been measured.
    std::map<std::string, std::string> variants;

    // The geometric mean of the ratios to the library's variant over the class's cases.
    double score() const;
    double noise() const;  // the largest noise over its cases
};

// The search's pick of a class timed again against the default, in fresh interleaved rounds in
// a process of its own (confirm.hpp).
struct Confirmation {
    std::string status;    // "shipped: ...", "not shipped: ...", or empty (not confirmed)
    RatioInterval speedup;  // default time / pick time over the class's cases, with its 95% interval
    std::map<std::string, RatioInterval> cases;  // case id -> the same, of that case alone
    double seconds = 0;     // what it took, its buffers' setup included
};

// How the search's budget was spent on a class (halving.hpp).
struct Spend {
    int candidates = 0;  // schedules measured on its cases (this run and those it resumed)
    double seconds = 0;  // wall time of its visits, their setups included
    int visits = 0;      // rungs of the successive halving it took part in
    std::string start;   // where its search started: "defaults" or a neighbouring class's best
};

struct ClassResult {
    ShapeClass klass;
    std::string best;      // id of the search's pick (empty when nothing beat the defaults)
    Config params;         // its knobs that differ from the defaults
    double score = 1;      // its score in the search
    double noise = 0;
    Confirmation confirmation;
    Spend spend;
    // Whether the build makes the class's variants: the pick's confirmed speedup interval lies
    // above 1 and no case of the class was confirmed slower (GPU records: select_classes' rule).
    bool significant = false;
};

// A runtime knob's measurement on one case: the same call's two choices, each followed by a
// read of its output (e.g. ordinary and streaming stores for streaming_min_output_bytes).
struct RuntimeTimes {
    std::string knob, case_id;
    std::int64_t value = 0;   // the case's quantity the threshold compares (its output bytes)
    double below_s = 0;       // the choice below the threshold (ordinary stores)
    double above_s = 0;       // the choice from it on (streaming stores)
    double noise = 0;
};

struct Record {
    std::string generator_version;
    std::string backend = "cpu";
    Machine machine;
    std::uint64_t seed = 1;
    double budget_seconds = 0;
    std::map<std::string, std::int64_t> runtime;  // runtime knobs
    std::vector<std::string> notes;               // what the search left alone, and why
    std::vector<ClassResult> classes;             // their score, noise and spend: in the log
    // The search's log.
    std::vector<TuneCase> cases;
    std::vector<RuntimeTimes> runtime_times;
    std::vector<Measured> measured;

    // What was measured of `schedule` on a class's cases, by any strategy; null when nothing was.
    const Measured *find(const std::string &class_name, const Schedule &schedule) const;
};

// `path` with its ".json" replaced by ".search.json": the log the tuner and its report read.
std::string search_log_path(const std::string &record_path);

// Writes the record to `path` and the search's log beside it.
void save(const Record &record, const std::string &path);
// The record and, where it is beside it, the search's log. Empty when `path` does not exist; throws when it is not a record of this format (a record of
// format magi2norm-tuning/1, from before the machine keys and the confirmation, included).
std::optional<Record> load(const std::string &path);

}  // namespace magi2norm::tuning
