#include "search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "batch.hpp"
#include "bench.hpp"
#include "candidate_check.hpp"

namespace magi2norm::tuning {

namespace {

double now() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string target_for(Backend backend, const Machine &machine) {
    return backend == Backend::cpu ? machine.isa : gpu_target(backend, machine.compute_capability);
}

// Input bytes of a case's call.
std::int64_t input_bytes(const TuneCase &c) { return c.bytes() / static_cast<std::int64_t>(dtype_size(c.in) + dtype_size(c.out)) *
                                                     static_cast<std::int64_t>(dtype_size(c.in)); }

// The knobs that can change a class's calls (schedules/cpu_schedule.cpp): the task sizes of the
// calls that do not prefetch, the prefetch threshold of calls near it, the memory tasks of those
// that prefetch (streaming-store variants always do), the chunk of tokens of many rows, the
// vector width of the element form. GPU classes: every GPU knob; backward classes: every knob of
// the backward's (its tiles and tasks shape every call).
std::vector<std::string> relevant_knobs(Backend backend, const std::vector<const TuneCase *> &cases,
                                        const std::vector<const detail::KernelEntry *> &library, const Config &incumbent) {
    std::vector<std::string> names;
    if (const Scope scope = knob_scope(class_of(*cases.front()), backend != Backend::cpu); scope != Scope::cpu) {
        for (const Knob &k : knobs()) {
            if (k.scope == scope) names.push_back(k.name);
        }
        return names;
    }
    std::set<std::string> chosen;
    const Knob &prefetch = knob("cpu_prefetch_bytes");
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const TuneCase &c = *cases[i];
        const std::int64_t in = input_bytes(c);
        const bool streaming = library[i]->streaming_alignment > 0;
        if (library[i]->form == detail::Form::elements) chosen.insert("cpu_vector_width");
        if (c.rows_per_token() > 1) chosen.insert("cpu_chunk_bytes");
        if (streaming || in >= incumbent.at("cpu_prefetch_bytes")) chosen.insert("cpu_memory_task_bytes");
        if (!streaming && in >= prefetch.values.front() / 2 && in <= prefetch.values.back() * 2) chosen.insert("cpu_prefetch_bytes");
        if (!streaming && in < incumbent.at("cpu_prefetch_bytes")) {
            chosen.insert("cpu_task_bytes");
            if (in < knob("cpu_task_bytes").values.back() * 2) chosen.insert("cpu_split_bytes");
        }
    }
    for (const Knob &k : knobs()) {  // in knobs.def's order
        if (chosen.count(k.name)) names.push_back(k.name);
    }
    return names;
}

// A class's result, in place of an earlier run's.
void keep_class_result(Record &record, const ClassResult &result) {
    auto &classes = record.classes;
    classes.erase(std::remove_if(classes.begin(), classes.end(),
                                 [&](const ClassResult &c) { return c.klass.name == result.klass.name; }),
                  classes.end());
    classes.push_back(result);
}

// "12:34 / 20:00"
std::string clock_text(double elapsed, double budget) {
    const auto mmss = [](double s) {
        char text[16];
        std::snprintf(text, sizeof text, "%d:%02d", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
        return std::string(text);
    };
    return mmss(elapsed) + " / " + mmss(budget);
}

// A record entry's verdict as the strategy takes it.
Outcome outcome_of(const Measured &m, double vs_incumbent, bool worse_somewhere) {
    Outcome o;
    o.ok = !std::isnan(vs_incumbent) && m.status == "ok";
    o.vs_incumbent = vs_incumbent;
    o.worse_somewhere = worse_somewhere;
    o.noise = m.noise();
    o.score = m.score();
    o.id = m.id;
    return o;
}

// The class of the same pass searched before whose pick is the nearest start for `klass`: the
// same dtype pair first, then the same row bucket, then the nearest bytes bucket; null when no
// class has a pick.
const ClassResult *neighbour(const Record &record, const ShapeClass &klass) {
    const ClassResult *best = nullptr;
    double best_distance = 0;
    for (const ClassResult &c : record.classes) {
        if (c.best.empty() || c.klass.name == klass.name || c.klass.backward != klass.backward) continue;
        const double distance = (c.klass.in != klass.in || c.klass.out != klass.out ? 1000 : 0) +
                                (c.klass.dim_min != klass.dim_min ? 100 : 0) +
                                std::abs(std::log2((c.klass.bytes_min + 1.0) / (klass.bytes_min + 1.0)));
        if (!best || distance < best_distance) {
            best = &c;
            best_distance = distance;
        }
    }
    return best;
}

}  // namespace

// What a class's visit keeps while it runs: the benches of its cases (buffers filled once), the
// library's variant and output on each, the kernels of every schedule compiled so far, and the
// class's result so far (an earlier visit's, or a resumed run's), whose spend the visit adds to.
struct Search::ClassRun {
    const ShapeClass &klass;
    ClassCases cases;
    std::vector<const detail::KernelEntry *> library;
    std::string target;
    std::map<std::string, std::vector<detail::KernelEntry>> kernels;  // schedule key -> one per case
    std::map<std::string, std::string> errors;                        // schedule key -> why it failed to build
    std::map<std::string, std::vector<std::string>> names;            // schedule key -> its variant's name per case
    ClassResult result;
    double start = 0;
    double deadline = 0;
    int fresh = 0;        // knob schedules measured in this visit
    int minimum = 0;      // knob schedules the visit measures however short its share
    int evaluations = 0;  // evaluate calls in this visit
    double incumbent_score = 1;  // the incumbent's score (the default's: 1)
    // Whether the visit goes on: its share lasts, or it has not yet measured its minimum (given
    // a few more tries, in case every schedule it meets was measured before).
    bool time_left() const { return now() < deadline || (fresh < minimum && evaluations < 4 * minimum); }
    const TuneCase &shape() const { return *cases.cases.front(); }
};

// A schedule's verdict in one evaluation.
struct Search::Evaluated {
    const Measured *measured;
    double vs_incumbent;   // its time over the incumbent's in the same rounds (NaN when rejected)
    bool worse_somewhere;  // slower than the library's variant on a case by more than the noise
};

namespace {

std::string schedule_key(const Schedule &s) {
    return s.kind + "|" + describe(s.config) + "|" + std::to_string(s.estimate_tokens) + "x" + std::to_string(s.estimate_rows) +
           "x" + std::to_string(s.estimate_dim) + "|" + std::to_string(s.dropout_seed);
}

// An autoscheduler's schedule at a case's own sizes.
Schedule autoscheduled(const char *kind, const TuneCase &shape, int dropout_seed = 0) {
    Schedule s;
    s.kind = kind;
    s.estimate_tokens = shape.tokens();
    s.estimate_rows = shape.rows_per_token();
    s.estimate_dim = shape.dim();
    s.dropout_seed = dropout_seed;
    return s;
}

Schedule knob_schedule(const Config &c) {
    Schedule s;
    s.config = c;
    return s;
}

}  // namespace

Search::Search(SearchOptions options, Compiler &compiler, Record &record)
    : options_(std::move(options)), compiler_(compiler), record_(record) {}

void Search::run() {
    const double start = now();
    const double end = start + options_.budget_seconds - options_.reserve_seconds;
    // Classes in the order of the record's cases.
    std::vector<ShapeClass> classes;
    std::map<std::string, std::vector<const TuneCase *>> members;
    for (const TuneCase &c : record_.cases) {
        const ShapeClass k = class_of(c);
        if (!members.count(k.name)) classes.push_back(k);
        members[k.name].push_back(&c);
    }
    const bool runtime = options_.strategy != "adams2019-sampling" && options_.backend == Backend::cpu;
    const double class_end = runtime ? end - options_.budget_seconds / 20 : end;
    const auto visit = [&](std::size_t i, double share, int rung) {
        const ClassProgress p = tune_class(classes[i], members[classes[i].name], share, rung);
        if (!options_.record_path.empty()) save(record_, options_.record_path);
        std::printf("[%s] %s: visit %d done (gain %.3f, first pass %.0f%% untried)\n",
                    clock_text(now() - start, options_.budget_seconds).c_str(), classes[i].name.c_str(), rung + 1, p.gain,
                    100 * p.untried);
        std::fflush(stdout);
        return p;
    };
    if (options_.strategy == "adams2019-sampling") {
        // The anchor keeps an even split: each class's share of what is left, from the end of
        // its setup.
        for (std::size_t i = 0; i < classes.size(); ++i) visit(i, (class_end - now()) / static_cast<double>(classes.size() - i), 0);
        return;
    }
    // Successive halving (halving.hpp).
    successive_halving(classes.size(), class_end, now, visit);
    if (runtime) tune_runtime(end);
}

void Search::tune_runtime(double deadline) {
    const Knob &threshold = knob("streaming_min_output_bytes");
    record_.runtime_times.erase(std::remove_if(record_.runtime_times.begin(), record_.runtime_times.end(),
                                               [&](const RuntimeTimes &t) { return t.knob == threshold.name; }),
                                record_.runtime_times.end());
    for (const TuneCase &c : record_.cases) {
        if (now() > deadline) break;
        if (c.backward) continue;  // the threshold is measured on the forward's outputs
        const std::int64_t out_bytes = c.bytes() / static_cast<std::int64_t>(dtype_size(c.in) + dtype_size(c.out)) *
                                       static_cast<std::int64_t>(dtype_size(c.out));
        if (out_bytes < threshold.values.front() / 2 || out_bytes > threshold.values.back() * 2) continue;
        CaseBench bench(c, class_of(c), record_.machine, options_.backend);
        const detail::KernelEntry *ordinary = bench.library_kernel(0), *streaming = bench.library_kernel(1);
        if (!ordinary || !streaming) continue;
        bench.read_output_after_calls(true);
        const CaseBench::Times t = bench.measure({ordinary, ordinary, streaming}, options_.rounds, false);
        RuntimeTimes r{threshold.name, c.id, out_bytes};
        const double a = median(t.kernels[0]), b = median(t.kernels[1]);
        r.below_s = std::min(a, b);
        r.noise = std::max(a, b) / std::min(a, b) - 1;
        r.above_s = median(t.kernels[2]);
        record_.runtime_times.push_back(r);
        std::printf("  %-44s %9lld bytes out: streaming stores %.3f of the ordinary time (noise %.3f)\n", c.id.c_str(),
                    static_cast<long long>(out_bytes), r.above_s / r.below_s, r.noise);
    }
    // The legal value that most calls agree with: those below it where ordinary stores were not
    // slower, those from it on where streaming stores were not (beyond the noise); ties keep the
    // value nearest the default.
    std::int64_t best = threshold.default_value;
    int best_misses = -1;
    for (const std::int64_t v : threshold.values) {
        int misses = 0;
        for (const RuntimeTimes &r : record_.runtime_times) {
            if (r.knob != threshold.name) continue;
            const double margin = std::max(r.noise, 0.01);
            if (r.value >= v && r.above_s > r.below_s * (1 + margin)) ++misses;
            if (r.value < v && r.below_s > r.above_s * (1 + margin)) ++misses;
        }
        const auto distance = [&](std::int64_t x) { return std::abs(std::log2(static_cast<double>(x) / threshold.default_value)); };
        if (best_misses < 0 || misses < best_misses || (misses == best_misses && distance(v) < distance(best))) {
            best = v;
            best_misses = misses;
        }
    }
    record_.runtime[threshold.name] = best;
    std::printf("  %s = %lld\n", threshold.name.c_str(), static_cast<long long>(best));
    // No model case has tokens of many short rows or one token of many rows with one modality.
    bool regrouped = false;
    for (const TuneCase &c : record_.cases) {
        if (c.backward) continue;  // the backward does not regroup rows
        const std::int64_t row = c.dim() * static_cast<std::int64_t>(dtype_size(c.in));
        regrouped = regrouped || (c.num_modality == 1 && (row <= record_.runtime.at("short_row_bytes") ||
                                                          row * c.rows_per_token() > record_.runtime.at("fold_token_bytes")));
    }
    const auto note_once = [&](const std::string &note) {
        if (std::find(record_.notes.begin(), record_.notes.end(), note) == record_.notes.end()) record_.notes.push_back(note);
    };
    if (!regrouped) note_once("fold_token_bytes, short_row_bytes: left at their defaults, no tuning case is regrouped");
    note_once("pool_spin_microseconds: left at its default, the tuning calls run back to back");
}

ClassProgress Search::tune_class(const ShapeClass &klass, const std::vector<const TuneCase *> &cases, double seconds, int visit) {
    ClassRun run{klass};
    run.start = now();
    run.minimum = visit == 0 ? kMinCandidates : 0;
    run.cases.cases = cases;
    for (const TuneCase *c : cases) {
        run.cases.benches.push_back(std::make_unique<CaseBench>(*c, klass, record_.machine, options_.backend));
        run.library.push_back(&run.cases.benches.back()->library_kernel());
        run.cases.expected.push_back(run.cases.benches.back()->output(nullptr));
    }
    run.deadline = now() + seconds;
    run.target = target_for(options_.backend, record_.machine);
    run.result.klass = klass;
    for (const ClassResult &c : record_.classes) {
        if (c.klass.name == klass.name) run.result = c;
    }
    run.result.klass = klass;
    // record_.measured grows while pointers into it are held: keep room.
    record_.measured.reserve(record_.measured.size() + 4096);

    if (options_.strategy == "adams2019-sampling") {
        for (int seed = 0; seed == 0 || now() < run.deadline; ++seed) {  // Adams2019 itself at least
            evaluate(run, {autoscheduled("adams2019", run.shape(), seed)}, nullptr, options_.strategy);
        }
        run.result.spend.start = "adams2019";
        return finish_class(run, {});
    }
    // Halide's autoschedulers, each at the class's own estimates, on the first visit (the
    // forward's: the backward's generator declares no estimates).
    if (visit == 0 && options_.backend == Backend::cpu && options_.strategy == "coordinate" && !klass.backward) {
        evaluate(run, {autoscheduled("adams2019", run.shape()), autoscheduled("li2018", run.shape()),
                       autoscheduled("mullapudi2016", run.shape())},
                 nullptr, "autoschedulers");
    }
    // Coordinate descent, then seeded restarts (strategy.hpp).
    const StrategyCalls calls = strategy_calls(run);
    Outcome start_outcome;
    const std::optional<Config> start = descent_start(run, calls, start_outcome);
    const std::uint64_t seed = options_.seed ^ std::hash<std::string>{}(klass.name) ^ (static_cast<std::uint64_t>(visit) << 32);
    const Config defaults = default_config(knob_scope(klass, options_.backend != Backend::cpu));
    const StrategyResult found = coordinate_search(start.value_or(defaults), calls, seed, start ? &start_outcome : nullptr);
    keep_pick(run.result, found);
    return finish_class(run, progress_of(run, found));
}

std::map<std::string, double> Search::build(ClassRun &run, const std::vector<Schedule> &schedules) {
    const std::size_t n = run.cases.cases.size();
    std::vector<VariantRequest> requests;
    std::vector<std::pair<std::string, std::size_t>> slots;  // schedule key, case index
    for (const Schedule &s : schedules) {
        const std::string key = schedule_key(s);
        if (run.kernels.count(key) || run.errors.count(key)) continue;
        for (std::size_t i = 0; i < n; ++i) {
            requests.push_back(request_for(s, *run.library[i], run.target));
            slots.emplace_back(key, i);
        }
    }
    const std::vector<Variant> made = compiler_.make(requests);
    std::map<std::string, double> seconds;
    for (std::size_t k = 0; k < made.size(); ++k) {
        const auto &[key, i] = slots[k];
        seconds[key] += made[k].compile_seconds;
        if (!made[k].error.empty()) run.errors[key] = made[k].error;
        run.kernels[key].resize(n);
        run.kernels[key][i] = made[k].entry;
        run.names[key].resize(n);
        run.names[key][i] = made[k].name;
    }
    for (const auto &[key, error] : run.errors) run.kernels.erase(key);
    return seconds;
}

std::vector<Search::Evaluated> Search::evaluate(ClassRun &run, const std::vector<Schedule> &schedules, const Schedule *incumbent,
                                                const std::string &strategy) {
    std::vector<Schedule> to_build(schedules);
    if (incumbent) to_build.push_back(*incumbent);
    ++run.evaluations;
    const auto seconds = build(run, to_build);
    std::vector<Evaluated> results;
    for (const Schedule &s : schedules) {
        if (!results.empty() && !run.time_left()) break;
        // Measured by an earlier run: its ratios to the library's variant stand.
        if (const Measured *known = record_.find(run.klass.name, s)) {
            bool worse = false;
            for (const auto &[id, t] : known->cases) worse = worse || t.ratio() > 1 + std::max(t.noise, 0.01);
            results.push_back({known, known->status == "ok" ? known->score() / run.incumbent_score : NAN, worse});
            continue;
        }
        const std::string key = schedule_key(s);
        results.push_back(measure_new(run, s, incumbent, seconds.count(key) ? seconds.at(key) : 0, strategy));
        const Measured &m = *results.back().measured;
        std::printf("  %-26s %-44s %s\n", run.klass.name.c_str(), s.describe().c_str(),
                    m.status == "ok" ? (std::to_string(m.score()).substr(0, 5) + " of the library's time").c_str()
                                     : m.status.substr(0, 90).c_str());
        std::fflush(stdout);
    }
    return results;
}

Search::Evaluated Search::measure_new(ClassRun &run, const Schedule &s, const Schedule *incumbent, double compile_seconds,
                                      const std::string &strategy) {
    const std::string key = schedule_key(s);
    const std::vector<const TuneCase *> &cases = run.cases.cases;
    Measured m;
    m.id = run.klass.name + "#" + std::to_string(std::count_if(record_.measured.begin(), record_.measured.end(),
                                                               [&](const Measured &x) { return x.class_name == run.klass.name; }));
    m.class_name = run.klass.name;
    m.strategy = strategy;
    m.schedule = s;
    m.compile_seconds = compile_seconds;
    m.status = run.errors.count(key) ? "rejected: " + run.errors.at(key) : check_candidate(run.cases, run.kernels.at(key), options_.backend);
    if (!s.autoscheduled()) ++run.fresh;
    double vs_incumbent = NAN;
    bool worse = false;
    if (m.status == "ok") {
        // The confirmation (another process) loads the pick from the cache by these names.
        if (options_.backend == Backend::cpu) {
            for (std::size_t i = 0; i < cases.size(); ++i) m.variants[cases[i]->id] = run.names.at(key)[i];
        }
        const bool has_incumbent = incumbent && run.kernels.count(schedule_key(*incumbent));
        double log_sum = 0;
        for (std::size_t i = 0; i < cases.size(); ++i) {
            std::vector<const detail::KernelEntry *> ks = {nullptr, nullptr, &run.kernels.at(key)[i]};
            if (has_incumbent) ks.push_back(&run.kernels.at(schedule_key(*incumbent))[i]);
            const CaseBench::Times t = run.cases.benches[i]->measure(ks, options_.rounds, true, true);
            const CaseTimes c = case_times(t);
            const double inc_s = has_incumbent ? median(t.kernels[3]) : c.library_s;
            log_sum += std::log(c.schedule_s / inc_s);
            worse = worse || c.ratio() > 1 + std::max(c.noise, 0.01);
            m.cases[cases[i]->id] = c;
        }
        vs_incumbent = std::exp(log_sum / static_cast<double>(cases.size()));
    }
    record_.measured.push_back(m);
    return {&record_.measured.back(), vs_incumbent, worse};
}

StrategyCalls Search::strategy_calls(ClassRun &run) {
    StrategyCalls calls;
    calls.knobs_of = [this, &run](const Config &c) { return relevant_knobs(options_.backend, run.cases.cases, run.library, c); };
    calls.time_left = [&run] { return run.time_left(); };
    calls.evaluate = [this, &run](const std::vector<Config> &tries, const Config *incumbent) {
        std::vector<Schedule> schedules;
        for (const Config &c : tries) schedules.push_back(knob_schedule(c));
        const Schedule incumbent_schedule = incumbent ? knob_schedule(*incumbent) : Schedule{};
        std::vector<Outcome> outcomes;
        for (const Evaluated &e : evaluate(run, schedules, incumbent ? &incumbent_schedule : nullptr, options_.strategy)) {
            outcomes.push_back(outcome_of(*e.measured, e.vs_incumbent, e.worse_somewhere));
        }
        return outcomes;
    };
    calls.on_incumbent = [&run](const Config &c, const Outcome &o) {
        run.incumbent_score = o.score;
        std::printf("  %-26s incumbent now %s (%.3f of the library's time)\n", run.klass.name.c_str(),
                    knob_schedule(c).describe().c_str(), o.score);
    };
    return calls;
}

std::optional<Config> Search::descent_start(ClassRun &run, const StrategyCalls &calls, Outcome &start_outcome) {
    ClassResult &result = run.result;
    for (const Measured &m : record_.measured) {
        if (!result.best.empty() && m.id == result.best && m.status == "ok") {
            if (result.spend.start.empty()) result.spend.start = "defaults";
            start_outcome = outcome_of(m, 1, false);
            run.incumbent_score = start_outcome.score;
            return m.schedule.config;
        }
    }
    const ClassResult *near = neighbour(record_, run.klass);
    if (!near) {
        if (result.spend.start.empty()) result.spend.start = "defaults";
        return std::nullopt;
    }
    const Config defaults = default_config(knob_scope(run.klass, options_.backend != Backend::cpu));
    Config tried = defaults;
    for (const std::string &name : relevant_knobs(options_.backend, run.cases.cases, run.library, defaults)) {
        if (near->params.count(name)) tried[name] = near->params.at(name);
    }
    std::optional<Config> start;
    std::string verdict = " (no knob of this class's)";
    if (tried != defaults) {
        verdict = " (did not win here)";
        const std::vector<Outcome> o = calls.evaluate({tried}, nullptr);
        if (!o.empty() && beats_incumbent(o[0])) {
            start = tried;
            start_outcome = o[0];
            run.incumbent_score = o[0].score;
        }
    }
    if (result.spend.start.empty()) {
        result.spend.start = start ? near->klass.name + "'s best" : "defaults; " + near->klass.name + "'s best" + verdict;
    }
    return start;
}

void Search::keep_pick(ClassResult &result, const StrategyResult &found) {
    result.best = found.moved ? found.outcome.id : "";
    result.params.clear();
    for (const auto &[name, value] : found.best) {
        if (value != knob(name).default_value) result.params[name] = value;
    }
    result.score = found.moved ? found.outcome.score : 1;
    result.noise = found.moved ? found.outcome.noise : 0;
    // Shipped only once confirmed (confirm.hpp).
    result.significant = false;
    result.confirmation = Confirmation{};
}

ClassProgress Search::progress_of(const ClassRun &run, const StrategyResult &found) const {
    ClassProgress progress;
    progress.gain = found.moved ? 1 - found.outcome.score : 0;
    const Config defaults = default_config(knob_scope(run.klass, options_.backend != Backend::cpu));
    std::size_t first_pass = 0;
    for (const std::string &name : relevant_knobs(options_.backend, run.cases.cases, run.library, defaults)) {
        first_pass += knob(name).values.size() - 1;
    }
    const int knob_candidates = static_cast<int>(std::count_if(record_.measured.begin(), record_.measured.end(), [&](const Measured &m) {
        return m.class_name == run.klass.name && !m.schedule.autoscheduled();
    }));
    progress.untried = first_pass == 0 ? 0 : std::max(0.0, 1 - static_cast<double>(knob_candidates) / static_cast<double>(first_pass));
    return progress;
}

ClassProgress Search::finish_class(ClassRun &run, ClassProgress progress) {
    run.result.spend.candidates = static_cast<int>(std::count_if(record_.measured.begin(), record_.measured.end(),
                                                                 [&](const Measured &m) { return m.class_name == run.klass.name; }));
    run.result.spend.seconds += now() - run.start;
    run.result.spend.visits += 1;
    keep_class_result(record_, run.result);
    return progress;
}

}  // namespace magi2norm::tuning
