#include "search.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "batch.hpp"
#include "bench.hpp"
#include "strategy.hpp"

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

// What a class's tuning keeps while it runs: the benches of its cases (buffers filled once), the
// library's variant and output on each, and the kernels of every schedule compiled so far.
struct Search::ClassRun {
    const ShapeClass &klass;
    std::vector<const TuneCase *> cases;
    std::vector<std::unique_ptr<CaseBench>> benches;
    std::vector<const detail::KernelEntry *> library;
    std::vector<std::vector<unsigned char>> expected;
    std::map<std::string, std::vector<detail::KernelEntry>> kernels;  // schedule key -> one per case
    std::map<std::string, std::string> errors;                        // schedule key -> why it failed to build
    std::map<std::string, std::vector<std::string>> names;            // schedule key -> its variant's name per case
    double deadline = 0;
    int fresh = 0;        // knob schedules measured in this visit
    int minimum = 0;      // knob schedules the visit measures however short its share
    int evaluations = 0;  // evaluate calls in this visit
    // Whether the visit goes on: its share lasts, or it has not yet measured its minimum (given
    // a few more tries, in case every schedule it meets was measured before).
    bool time_left() const { return now() < deadline || (fresh < minimum && evaluations < 4 * minimum); }
};

namespace {

std::string schedule_key(const Schedule &s) {
    return s.kind + "|" + describe(s.config) + "|" + std::to_string(s.estimate_tokens) + "x" + std::to_string(s.estimate_rows) +
           "x" + std::to_string(s.estimate_dim) + "|" + std::to_string(s.dropout_seed);
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
    const double visit_start = now();
    ClassRun run{klass, cases};
    run.minimum = visit == 0 ? kMinCandidates : 0;
    for (const TuneCase *c : cases) {
        run.benches.push_back(std::make_unique<CaseBench>(*c, klass, record_.machine, options_.backend));
        run.library.push_back(&run.benches.back()->library_kernel());
        run.expected.push_back(run.benches.back()->output(nullptr));
    }
    run.deadline = now() + seconds;
    const std::string target = target_for(options_.backend, record_.machine);
    const TuneCase &shape = *cases.front();

    // Makes (or finds in the compiler's cache) the kernels of `schedules` for every case.
    const auto build = [&](const std::vector<Schedule> &schedules) {
        std::vector<VariantRequest> requests;
        std::vector<std::pair<std::string, std::size_t>> slots;  // schedule key, case index
        for (const Schedule &s : schedules) {
            const std::string key = schedule_key(s);
            if (run.kernels.count(key) || run.errors.count(key)) continue;
            for (std::size_t i = 0; i < cases.size(); ++i) {
                requests.push_back(request_for(s, *run.library[i], target));
                slots.emplace_back(key, i);
            }
        }
        const std::vector<Variant> made = compiler_.make(requests);
        std::map<std::string, double> seconds;
        for (std::size_t k = 0; k < made.size(); ++k) {
            const std::string &key = slots[k].first;
            seconds[key] += made[k].compile_seconds;
            if (!made[k].error.empty()) run.errors[key] = made[k].error;
            auto &list = run.kernels[key];
            list.resize(cases.size());
            list[slots[k].second] = made[k].entry;
            auto &names = run.names[key];
            names.resize(cases.size());
            names[slots[k].second] = made[k].name;
        }
        for (const auto &[key, error] : run.errors) run.kernels.erase(key);
        return seconds;
    };

    // Runs `kernels` on every case in a child process (one thread, the parent's buffers); "ok"
    // when every output has the library's bits.
    const auto check = [&](const std::vector<detail::KernelEntry> &kernels) -> std::string {
        if (options_.backend != Backend::cpu) {
            // A GPU driver's threads do not survive a fork: checked here (a fault ends the run).
            try {
                for (std::size_t i = 0; i < cases.size(); ++i) {
                    if (run.benches[i]->output(&kernels[i]) != run.expected[i]) {
                        return "rejected: its output on " + cases[i]->id + " differs from the library's";
                    }
                }
                return "ok";
            } catch (const std::exception &e) {
                return std::string("rejected: ") + e.what();
            }
        }
        int pipe_fd[2];
        if (pipe(pipe_fd) != 0) return "rejected: cannot check (no pipe)";
        std::fflush(nullptr);
        const pid_t pid = fork();
        if (pid == 0) {
            close(pipe_fd[0]);
            std::string verdict = "ok";
            try {
                // One thread, through a host loop: Halide's pool (and halide_set_num_threads) takes
                // a mutex that one of the parent's workers may have held at the fork.
                set_parallel_for([](void *, int count, void (*task)(void *, int), void *task_context) {
                    for (int i = 0; i < count; ++i) task(task_context, i);
                });
                for (std::size_t i = 0; i < cases.size() && verdict == "ok"; ++i) {
                    if (run.benches[i]->output(&kernels[i]) != run.expected[i]) {
                        verdict = "rejected: its output on " + cases[i]->id + " differs from the library's";
                    }
                }
            } catch (const std::exception &e) {
                verdict = std::string("rejected: ") + e.what();
            }
            if (write(pipe_fd[1], verdict.data(), verdict.size()) < 0) _exit(3);
            _exit(0);
        }
        close(pipe_fd[1]);
        std::string verdict;
        char buffer[512];
        // A check that hangs (a candidate that never ends) is ended after two minutes.
        bool timed_out = false;
        for (;;) {
            pollfd ready{pipe_fd[0], POLLIN, 0};
            if (poll(&ready, 1, 120000) <= 0) {
                timed_out = true;
                kill(pid, SIGKILL);
                break;
            }
            const ssize_t n = read(pipe_fd[0], buffer, sizeof buffer);
            if (n <= 0) break;
            verdict.append(buffer, static_cast<std::size_t>(n));
        }
        close(pipe_fd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        if (timed_out) return "rejected: its check did not end within 120 s";
        if (WIFSIGNALED(status)) return "rejected: it faulted (signal " + std::to_string(WTERMSIG(status)) + ")";
        return verdict.empty() ? "rejected: the check ended without a verdict" : verdict;
    };

    // Measures `schedules` (built first, together) against the library's variant and
    // `incumbent` in the same rounds. Returns, per schedule, its record entry and its score
    // relative to the incumbent's in those rounds (NaN when rejected).
    struct Evaluated {
        const Measured *measured;
        double vs_incumbent;
        bool worse_somewhere;  // slower than the library's variant on a case by more than the noise
    };
    const auto evaluate = [&](const std::vector<Schedule> &schedules, const Schedule *incumbent, double incumbent_score,
                              const std::string &strategy) -> std::vector<Evaluated> {
        std::vector<Schedule> to_build(schedules);
        if (incumbent) to_build.push_back(*incumbent);
        ++run.evaluations;
        const auto seconds = build(to_build);
        std::vector<Evaluated> results;
        for (const Schedule &s : schedules) {
            const std::string key = schedule_key(s);
            if (!results.empty() && !run.time_left()) break;
            // Measured by an earlier run: its ratios to the library's variant stand.
            if (const Measured *known = record_.find(klass.name, s)) {
                bool worse = false;
                for (const auto &[id, t] : known->cases) worse = worse || t.ratio() > 1 + std::max(t.noise, 0.01);
                results.push_back({known, known->status == "ok" ? known->score() / incumbent_score : NAN, worse});
                continue;
            }
            Measured m;
            m.id = klass.name + "#" + std::to_string(std::count_if(record_.measured.begin(), record_.measured.end(),
                                                                   [&](const Measured &x) { return x.class_name == klass.name; }));
            m.class_name = klass.name;
            m.strategy = strategy;
            m.schedule = s;
            m.compile_seconds = seconds.count(key) ? seconds.at(key) : 0;
            if (run.errors.count(key)) {
                m.status = "rejected: " + run.errors.at(key);
            } else {
                m.status = check(run.kernels.at(key));
            }
            double vs_incumbent = NAN;
            bool worse = false;
            if (!s.autoscheduled()) ++run.fresh;
            if (m.status == "ok" && options_.backend == Backend::cpu) {
                // The confirmation (another process) loads the pick from the cache by these names.
                for (std::size_t i = 0; i < cases.size(); ++i) m.variants[cases[i]->id] = run.names.at(key)[i];
            }
            if (m.status == "ok") {
                const bool has_incumbent = incumbent && run.kernels.count(schedule_key(*incumbent));
                double log_sum = 0;
                for (std::size_t i = 0; i < cases.size(); ++i) {
                    std::vector<const detail::KernelEntry *> ks = {nullptr, nullptr, &run.kernels.at(key)[i]};
                    if (has_incumbent) ks.push_back(&run.kernels.at(schedule_key(*incumbent))[i]);
                    const CaseBench::Times t = run.benches[i]->measure(ks, options_.rounds, true, true);
                    const CaseTimes c = case_times(t);
                    const double inc_s = has_incumbent ? median(t.kernels[3]) : c.library_s;
                    log_sum += std::log(c.schedule_s / inc_s);
                    worse = worse || c.ratio() > 1 + std::max(c.noise, 0.01);
                    m.cases[cases[i]->id] = c;
                }
                vs_incumbent = std::exp(log_sum / static_cast<double>(cases.size()));
            }
            record_.measured.push_back(m);
            results.push_back({&record_.measured.back(), vs_incumbent, worse});
            std::printf("  %-26s %-44s %s\n", klass.name.c_str(), s.describe().c_str(),
                        m.status == "ok" ? (std::to_string(m.score()).substr(0, 5) + " of the library's time").c_str()
                                         : m.status.substr(0, 90).c_str());
            std::fflush(stdout);
        }
        return results;
    };
    // record_.measured grows while pointers into it are held: keep room.
    record_.measured.reserve(record_.measured.size() + 4096);

    // The class's result so far (an earlier visit's, or a resumed run's), whose spend this visit adds to.
    ClassResult result;
    result.klass = klass;
    for (const ClassResult &c : record_.classes) {
        if (c.klass.name == klass.name) result = c;
    }
    result.klass = klass;
    const Config defaults = default_config(knob_scope(klass, options_.backend != Backend::cpu));
    const auto finish = [&](ClassProgress progress) {
        result.spend.candidates = static_cast<int>(std::count_if(record_.measured.begin(), record_.measured.end(),
                                                                 [&](const Measured &m) { return m.class_name == klass.name; }));
        result.spend.seconds += now() - visit_start;
        result.spend.visits += 1;
        keep_class_result(record_, result);
        return progress;
    };

    if (options_.strategy == "adams2019-sampling") {
        for (int seed = 0; seed == 0 || now() < run.deadline; ++seed) {  // Adams2019 itself at least
            Schedule s;
            s.kind = "adams2019";
            s.estimate_tokens = shape.tokens();
            s.estimate_rows = shape.rows_per_token();
            s.estimate_dim = shape.dim();
            s.dropout_seed = seed;
            evaluate({s}, nullptr, 1, options_.strategy);
        }
        result.spend.start = "adams2019";
        return finish({});
    }

    // Halide's autoschedulers, each at the class's own estimates, on the first visit (the
    // forward's: the backward's generator declares no estimates).
    if (visit == 0 && options_.backend == Backend::cpu && options_.strategy == "coordinate" && !klass.backward) {
        std::vector<Schedule> autos;
        for (const char *kind : {"adams2019", "li2018", "mullapudi2016"}) {
            Schedule s;
            s.kind = kind;
            s.estimate_tokens = shape.tokens();
            s.estimate_rows = shape.rows_per_token();
            s.estimate_dim = shape.dim();
            autos.push_back(s);
        }
        evaluate(autos, nullptr, 1, "autoschedulers");
    }

    // Coordinate descent, then seeded restarts (strategy.hpp).
    StrategyCalls calls;
    calls.knobs_of = [&](const Config &c) { return relevant_knobs(options_.backend, cases, run.library, c); };
    calls.time_left = [&] { return run.time_left(); };
    double incumbent_score = 1;
    calls.evaluate = [&](const std::vector<Config> &tries, const Config *incumbent) {
        const auto schedule_of = [](const Config &c) {
            Schedule s;
            s.config = c;
            return s;
        };
        std::vector<Schedule> schedules;
        for (const Config &c : tries) schedules.push_back(schedule_of(c));
        const Schedule incumbent_schedule = incumbent ? schedule_of(*incumbent) : Schedule{};
        std::vector<Outcome> outcomes;
        for (const Evaluated &e : evaluate(schedules, incumbent ? &incumbent_schedule : nullptr, incumbent_score, options_.strategy)) {
            outcomes.push_back(outcome_of(*e.measured, e.vs_incumbent, e.worse_somewhere));
        }
        return outcomes;
    };
    calls.on_incumbent = [&](const Config &c, const Outcome &o) {
        incumbent_score = o.score;
        Schedule s;
        s.config = c;
        std::printf("  %-26s incumbent now %s (%.3f of the library's time)\n", klass.name.c_str(), s.describe().c_str(), o.score);
    };

    // Where the descent starts: the class's own best from an earlier visit; else, on a first
    // visit, the best of the nearest class searched before, where it beats the defaults here
    // (timed against them); else the defaults.
    Config start = defaults;
    Outcome start_outcome;
    bool started = false;
    const Measured *own = nullptr;
    for (const Measured &m : record_.measured) {
        if (!result.best.empty() && m.id == result.best && m.status == "ok") own = &m;
    }
    if (own) {
        start = own->schedule.config;
        start_outcome = outcome_of(*own, 1, false);
        started = true;
    } else if (const ClassResult *near = neighbour(record_, klass)) {
        Config tried = defaults;
        for (const std::string &name : relevant_knobs(options_.backend, cases, run.library, defaults)) {
            if (near->params.count(name)) tried[name] = near->params.at(name);
        }
        std::string verdict = " (did not win here)";
        if (tried != defaults) {
            const std::vector<Outcome> o = calls.evaluate({tried}, nullptr);
            if (!o.empty() && beats_incumbent(o[0])) {
                start = tried;
                start_outcome = o[0];
                started = true;
                incumbent_score = o[0].score;
                verdict = "";
            }
        } else {
            verdict = " (no knob of this class's)";
        }
        if (result.spend.start.empty()) result.spend.start = started ? near->klass.name + "'s best" : "defaults; " + near->klass.name + "'s best" + verdict;
    }
    if (result.spend.start.empty()) result.spend.start = "defaults";
    if (started) incumbent_score = start_outcome.score;
    const std::uint64_t seed = options_.seed ^ std::hash<std::string>{}(klass.name) ^ (static_cast<std::uint64_t>(visit) << 32);
    const StrategyResult found = coordinate_search(start, calls, seed, started ? &start_outcome : nullptr);
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

    ClassProgress progress;
    progress.gain = found.moved ? 1 - found.outcome.score : 0;
    std::size_t first_pass = 0;
    for (const std::string &name : relevant_knobs(options_.backend, cases, run.library, defaults)) first_pass += knob(name).values.size() - 1;
    const int knob_candidates = static_cast<int>(std::count_if(record_.measured.begin(), record_.measured.end(), [&](const Measured &m) {
        return m.class_name == klass.name && !m.schedule.autoscheduled();
    }));
    progress.untried = first_pass == 0 ? 0 : std::max(0.0, 1 - static_cast<double>(knob_candidates) / static_cast<double>(first_pass));
    return finish(progress);
}

}  // namespace magi2norm::tuning
