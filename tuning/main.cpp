// magi2-tune: finds this machine's best schedule knobs per shape class, and writes the record
// a build ships (-DMAGI2NORM_TUNING=<record>). `magi2-tune --help` lists its flags (kHelp).
//
// GPU backends take the batch path (tuning/batch.hpp): with opencl every step runs here, unless
// --batch-only; with cuda (or --batch-only) this makes the candidates (for --capability, default
// 86), magi2-tune-measure times them on the GPU machine, and `magi2-tune --select --record FILE`
// keeps each class's best.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "batch.hpp"
#include "compile.hpp"
#include "machine.hpp"
#include "record.hpp"
#include "search.hpp"

namespace {

using namespace magi2norm::tuning;

std::vector<std::int64_t> numbers(const std::string &list) {
    std::vector<std::int64_t> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
    return out;
}

std::vector<std::string> words(const std::string &list) {
    std::vector<std::string> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) out.push_back(item);
    return out;
}

constexpr const char *kHelp = R"(magi2-tune: finds this machine's best schedule knobs per shape class and writes the record a
build ships (-DMAGI2NORM_TUNING=<record>; docs/tuning.md, docs/tuning_record.md).

  --budget SECONDS    wall-clock time for the whole run (default 1200): the search shares five
                      sixths of it among the classes by successive halving, and a sixth is kept
                      for confirming each class's pick against the default in a new process
                      (magi2-tune-measure --confirm); only confirmed picks ship
  --seed N            seed of the search's random choices: a run can be repeated (default 1)
  --record FILE       the record to write; an existing one for this machine and these sources is
                      resumed: what it holds is not measured again (default tuning.json)
  --cache DIR         where candidates' objects are kept, by their parameters (default tuning-cache)
  --tokens LIST       token counts of the model's norms, e.g. 16,256 (default 16,256,4096,32768)
  --norms LIST        which of SPEC.md's norms: pre_norm,qk_norm,mhc_norm,final_norm
                      (default all; mhc_norm has both its output dtypes)
  --passes LIST       forward,backward (default both on the CPU; GPU backends and the anchor
                      strategy: forward), each
                      norm's backward as autograd calls it: dy in the forward's output dtype, dx
                      in x's, and the weight gradient
  --strategy NAME     coordinate (default): autoschedulers, coordinate descent, restarts;
                      knobs: the same without the autoschedulers (no plugin compiles);
                      adams2019-sampling: the anchor, Adams2019 and its random-dropout samples
  --rounds N          interleaved timing rounds per comparison (default 7)
  --jobs N            candidates compiled at once (default: the cores)
  --report DIR        also write DIR/report.md and, with matplotlib, DIR/report.png
  --backend NAME      cpu (default), opencl (every step here, on this machine's OpenCL), or cuda
                      (makes the candidates; magi2-tune-measure times them on the GPU machine)
  --capability NN     cuda: the lowest compute capability x 10 the candidates run on (default 86)
  --random N          GPU backends: seeded random configurations per class besides the defaults
                      and each knob's other values (default 8)
  --batch-only        opencl: make the candidates and stop, as cuda always does (then
                      magi2-tune-measure --backend opencl, then --select), each step its own process
  --select            GPU backends: keep each class's best of a measured record, then exit
  --help              this text
)";

// The part of the budget kept for the confirmation (confirm.hpp).
constexpr double kConfirmShare = 1.0 / 6;

// magi2-tune-measure --confirm, beside this program: the picks and the defaults timed again in
// a process of their own; it writes the verdicts into the record.
bool run_confirmation(const std::string &record, const std::string &cache, double seconds) {
    char self[4096] = {};
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string(".");
    dir = dir.substr(0, dir.find_last_of('/'));
    const std::string cmd = "'" + dir + "/magi2-tune-measure' --confirm --record '" + record + "' --cache '" + cache +
                            "' --seconds " + std::to_string(seconds);
    std::printf("confirming the picks in a new process (%.0f s)\n", seconds);
    std::fflush(stdout);
    if (std::system(cmd.c_str()) != 0) {
        std::fprintf(stderr, "magi2-tune: the confirmation failed (%s)\n", cmd.c_str());
        return false;
    }
    return true;
}

[[noreturn]] void usage(const std::string &why) {
    std::fprintf(stderr, "magi2-tune: %s\n(magi2-tune --help lists the flags)\n", why.c_str());
    std::exit(2);
}

struct Flags {
    SearchOptions search;
    std::string record_path = "tuning.json", cache = "tuning-cache", report;
    std::vector<std::int64_t> tokens = {16, 256, 4096, 32768};
    std::vector<std::string> norms;
    bool forward = false, backward = false;
    int jobs = 0, capability = 86, random_per_class = 8;
    bool select = false, batch_only = false;
};

magi2norm::Backend backend_of(const std::string &name) {
    if (name == "cpu") return magi2norm::Backend::cpu;
    if (name == "opencl") return magi2norm::Backend::opencl;
    if (name == "cuda") return magi2norm::Backend::cuda;
    usage("--backend is cpu, opencl or cuda");
}

// The passes to tune: both on the CPU by default, the forward only on GPUs and in the anchor.
void take_passes(Flags &f, std::vector<std::string> passes) {
    const bool cpu = f.search.backend == magi2norm::Backend::cpu;
    if (passes.empty()) {
        passes = {"forward"};
        if (cpu && f.search.strategy != "adams2019-sampling") passes.push_back("backward");
    }
    for (const std::string &p : passes) {
        if (p == "forward") f.forward = true;
        else if (p == "backward") f.backward = true;
        else usage("--passes is forward, backward or both, not " + p);
    }
    if (f.backward && !cpu) usage("--passes backward: the backward is tuned on CPUs only");
    if (f.backward && f.search.strategy == "adams2019-sampling") usage("--passes backward: the anchor strategy schedules the forward only");
}

Flags parse(int argc, char **argv) {
    Flags f;
    std::vector<std::string> passes;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--help" || a == "-h") {
            std::fputs(kHelp, stdout);
            std::exit(0);
        }
        if (a == "--budget") f.search.budget_seconds = std::stod(value());
        else if (a == "--seed") f.search.seed = std::stoull(value());
        else if (a == "--record") f.record_path = value();
        else if (a == "--cache") f.cache = value();
        else if (a == "--tokens") f.tokens = numbers(value());
        else if (a == "--norms") f.norms = words(value());
        else if (a == "--passes") passes = words(value());
        else if (a == "--strategy") f.search.strategy = value();
        else if (a == "--rounds") f.search.rounds = std::stoi(value());
        else if (a == "--jobs") f.jobs = std::stoi(value());
        else if (a == "--report") f.report = value();
        else if (a == "--capability") f.capability = std::stoi(value());
        else if (a == "--random") f.random_per_class = std::stoi(value());
        else if (a == "--select") f.select = true;
        else if (a == "--batch-only") f.batch_only = true;
        else if (a == "--backend") f.search.backend = backend_of(value());
        else usage("unknown argument " + a);
    }
    const std::string &strategy = f.search.strategy;
    if (strategy != "coordinate" && strategy != "knobs" && strategy != "adams2019-sampling") usage("unknown --strategy " + strategy);
    f.search.record_path = f.record_path;
    if (f.batch_only && f.search.backend == magi2norm::Backend::cpu) usage("--batch-only is for GPU backends");
    take_passes(f, passes);
    return f;
}

// The record to resume (it must be of this machine, generator and backend), or a new one with
// the runtime knobs' defaults; empty when the one there is another's.
std::optional<Record> open_record(const Flags &f, const Machine &machine) {
    if (auto found = load(f.record_path)) {
        const std::string other_machine = machine_difference(found->machine, machine);
        if (found->generator_version != MAGI2NORM_GENERATOR_VERSION || !other_machine.empty() ||
            found->backend != magi2norm::backend_name(f.search.backend)) {
            std::fprintf(stderr, "magi2-tune: %s was made for another machine, generator or backend (%s; backend %s); name a new --record\n",
                         f.record_path.c_str(), other_machine.empty() ? "generator_version differs" : other_machine.c_str(),
                         found->backend.c_str());
            return std::nullopt;
        }
        std::printf("resuming %s: %zu schedules measured\n", f.record_path.c_str(), found->measured.size());
        return found;
    }
    Record record;
    record.generator_version = MAGI2NORM_GENERATOR_VERSION;
    record.backend = magi2norm::backend_name(f.search.backend);
    record.machine = machine;
    record.seed = f.search.seed;
    for (const Knob &k : knobs()) {
        if (k.scope == Scope::runtime) record.runtime[k.name] = k.default_value;
    }
    return record;
}

// The model's cases the flags name, those the record does not hold yet appended.
void add_cases(Record &record, const Flags &f) {
    for (const TuneCase &c : model_cases(f.tokens, f.backward)) {
        if (!f.norms.empty() && std::find(f.norms.begin(), f.norms.end(), c.norm) == f.norms.end()) continue;
        if (!c.backward && !f.forward) continue;
        bool known = false;
        for (const TuneCase &k : record.cases) known = known || k.id == c.id;
        if (!known) record.cases.push_back(c);
    }
}

void print_start(const Record &record, const Flags &f, const Machine &machine) {
    std::printf("magi2-tune: %zu cases, budget %.0f s, %s on %s (%s family %d model %d stepping %d, %s, %d cores, %d threads, "
                "L2 %lld KiB, L3 %lld MiB), strategy %s, seed %llu\n",
                record.cases.size(), f.search.budget_seconds, record.backend.c_str(), machine.cpu.c_str(), machine.vendor.c_str(),
                machine.family, machine.model, machine.stepping, machine.isa.c_str(), machine.cores, machine.threads,
                static_cast<long long>(machine.l2 >> 10), static_cast<long long>(machine.l3 >> 20), f.search.strategy.c_str(),
                static_cast<unsigned long long>(f.search.seed));
}

// The search, then (but for the anchor) the confirmation of its picks in a process of its own.
bool tune_cpu(Record &record, Flags f, Compiler &compiler) {
    const bool confirm = f.search.strategy != "adams2019-sampling";
    if (confirm) f.search.reserve_seconds = f.search.budget_seconds * kConfirmShare;
    Search(f.search, compiler, record).run();
    if (!confirm) return true;
    save(record, f.record_path);
    if (!run_confirmation(f.record_path, f.cache, f.search.reserve_seconds)) return false;
    record = *load(f.record_path);
    return true;
}

// The batch path: the candidates made here, then timed and selected here (OpenCL), or left for
// magi2-tune-measure on the GPU machine (CUDA, --batch-only). Whether the search is done.
bool tune_gpu(Record &record, const Flags &f, Compiler &compiler) {
    const magi2norm::Backend backend = f.search.backend;
    record.machine.compute_capability = backend == magi2norm::Backend::cuda ? f.capability : 0;
    prepare_batch(record, compiler, backend, f.random_per_class);
    if (backend == magi2norm::Backend::cuda || f.batch_only) {
        save(record, f.record_path);
        std::printf("made the candidates; on the GPU machine: magi2-tune-measure --record %s --cache %s --backend %s\n"
                    "then here: magi2-tune --select --record %s\n", f.record_path.c_str(), f.cache.c_str(),
                    magi2norm::backend_name(backend), f.record_path.c_str());
        return false;
    }
    measure_pending(record, compiler, backend, f.search.rounds);
    select_classes(record);
    return true;
}

void write_report(const Flags &f) {
    if (f.report.empty()) return;
    const std::string cmd = std::string(MAGI2NORM_PYTHON) + " " + MAGI2NORM_TUNE_REPORT_PY + " '" + f.record_path + "' --out '" + f.report + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "magi2-tune: the report failed (%s)\n", cmd.c_str());
}

}  // namespace

int main(int argc, char **argv) {
    const Flags f = parse(argc, argv);
    if (f.select) {
        auto found = load(f.record_path);
        if (!found) usage("no record at " + f.record_path);
        select_classes(*found);
        save(*found, f.record_path);
        std::printf("record: %s (%zu classes)\n", f.record_path.c_str(), found->classes.size());
        return 0;
    }
    const Machine machine = this_machine();
    std::optional<Record> opened = open_record(f, machine);
    if (!opened) return 1;
    Record &record = *opened;
    record.budget_seconds = f.search.budget_seconds;
    add_cases(record, f);
    print_start(record, f, machine);
    Compiler compiler(f.cache, f.jobs > 0 ? f.jobs : machine.threads);
    if (f.search.backend == magi2norm::Backend::cpu) {
        if (!tune_cpu(record, f, compiler)) return 1;
    } else if (!tune_gpu(record, f, compiler)) {
        return 0;
    }
    save(record, f.record_path);
    std::printf("record: %s\n", f.record_path.c_str());
    write_report(f);
    return 0;
}
