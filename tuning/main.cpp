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

}  // namespace

int main(int argc, char **argv) {
    SearchOptions options;
    std::string record_path = "tuning.json", cache = "tuning-cache", report;
    std::vector<std::int64_t> tokens = {16, 256, 4096, 32768};
    std::vector<std::string> norms, passes;
    int jobs = 0, capability = 86, random_per_class = 8;
    bool select = false;
    bool batch_only = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--help" || a == "-h") {
            std::fputs(kHelp, stdout);
            return 0;
        }
        if (a == "--budget") options.budget_seconds = std::stod(value());
        else if (a == "--seed") options.seed = std::stoull(value());
        else if (a == "--record") record_path = value();
        else if (a == "--cache") cache = value();
        else if (a == "--tokens") tokens = numbers(value());
        else if (a == "--norms") norms = words(value());
        else if (a == "--passes") passes = words(value());
        else if (a == "--strategy") options.strategy = value();
        else if (a == "--rounds") options.rounds = std::stoi(value());
        else if (a == "--jobs") jobs = std::stoi(value());
        else if (a == "--report") report = value();
        else if (a == "--capability") capability = std::stoi(value());
        else if (a == "--random") random_per_class = std::stoi(value());
        else if (a == "--select") select = true;
        else if (a == "--batch-only") batch_only = true;
        else if (a == "--backend") {
            const std::string b = value();
            if (b == "cpu") options.backend = magi2norm::Backend::cpu;
            else if (b == "opencl") options.backend = magi2norm::Backend::opencl;
            else if (b == "cuda") options.backend = magi2norm::Backend::cuda;
            else usage("--backend is cpu, opencl or cuda");
        } else usage("unknown argument " + a);
    }
    if (options.strategy != "coordinate" && options.strategy != "knobs" && options.strategy != "adams2019-sampling") usage("unknown --strategy " + options.strategy);
    options.record_path = record_path;
    if (batch_only && options.backend == magi2norm::Backend::cpu) usage("--batch-only is for GPU backends");
    const bool cpu = options.backend == magi2norm::Backend::cpu;
    if (passes.empty()) {
        passes = {"forward"};
        if (cpu && options.strategy != "adams2019-sampling") passes.push_back("backward");
    }
    bool forward = false, backward = false;
    for (const std::string &p : passes) {
        if (p == "forward") forward = true;
        else if (p == "backward") backward = true;
        else usage("--passes is forward, backward or both, not " + p);
    }
    if (backward && !cpu) usage("--passes backward: the backward is tuned on CPUs only");
    if (backward && options.strategy == "adams2019-sampling") usage("--passes backward: the anchor strategy schedules the forward only");

    const Machine machine = this_machine();
    if (select) {
        auto found = load(record_path);
        if (!found) usage("no record at " + record_path);
        select_classes(*found);
        save(*found, record_path);
        std::printf("record: %s (%zu classes)\n", record_path.c_str(), found->classes.size());
        return 0;
    }
    Record record;
    if (auto found = load(record_path)) {
        record = *found;
        const std::string other_machine = machine_difference(record.machine, machine);
        if (record.generator_version != MAGI2NORM_GENERATOR_VERSION || !other_machine.empty() ||
            record.backend != magi2norm::backend_name(options.backend)) {
            std::fprintf(stderr, "magi2-tune: %s was made for another machine, generator or backend (%s; backend %s); name a new --record\n",
                         record_path.c_str(), other_machine.empty() ? "generator_version differs" : other_machine.c_str(),
                         record.backend.c_str());
            return 1;
        }
        std::printf("resuming %s: %zu schedules measured\n", record_path.c_str(), record.measured.size());
    } else {
        record.generator_version = MAGI2NORM_GENERATOR_VERSION;
        record.backend = magi2norm::backend_name(options.backend);
        record.machine = machine;
        record.seed = options.seed;
        for (const Knob &k : knobs()) {
            if (k.scope == Scope::runtime) record.runtime[k.name] = k.default_value;
        }
    }
    record.budget_seconds = options.budget_seconds;
    for (const TuneCase &c : model_cases(tokens, backward)) {
        if (!norms.empty() && std::find(norms.begin(), norms.end(), c.norm) == norms.end()) continue;
        if (!c.backward && !forward) continue;
        bool known = false;
        for (const TuneCase &k : record.cases) known = known || k.id == c.id;
        if (!known) record.cases.push_back(c);
    }
    std::printf("magi2-tune: %zu cases, budget %.0f s, %s on %s (%s family %d model %d stepping %d, %s, %d cores, %d threads, "
                "L2 %lld KiB, L3 %lld MiB), strategy %s, seed %llu\n",
                record.cases.size(), options.budget_seconds, record.backend.c_str(), machine.cpu.c_str(), machine.vendor.c_str(),
                machine.family, machine.model, machine.stepping, machine.isa.c_str(), machine.cores, machine.threads,
                static_cast<long long>(machine.l2 >> 10), static_cast<long long>(machine.l3 >> 20), options.strategy.c_str(),
                static_cast<unsigned long long>(options.seed));
    Compiler compiler(cache, jobs > 0 ? jobs : machine.threads);
    if (options.backend == magi2norm::Backend::cpu) {
        const bool confirm = options.strategy != "adams2019-sampling";
        if (confirm) options.reserve_seconds = options.budget_seconds * kConfirmShare;
        Search(options, compiler, record).run();
        if (confirm) {
            save(record, record_path);
            if (!run_confirmation(record_path, cache, options.reserve_seconds)) return 1;
            record = *load(record_path);
        }
    } else {
        record.machine.compute_capability = options.backend == magi2norm::Backend::cuda ? capability : 0;
        prepare_batch(record, compiler, options.backend, random_per_class);
        if (options.backend == magi2norm::Backend::cuda || batch_only) {
            save(record, record_path);
            std::printf("made the candidates; on the GPU machine: magi2-tune-measure --record %s --cache %s --backend %s\n"
                        "then here: magi2-tune --select --record %s\n", record_path.c_str(), cache.c_str(),
                        magi2norm::backend_name(options.backend), record_path.c_str());
            return 0;
        }
        measure_pending(record, compiler, options.backend, options.rounds);
        select_classes(record);
    }
    save(record, record_path);
    std::printf("record: %s\n", record_path.c_str());
    if (!report.empty()) {
        const std::string cmd = std::string(MAGI2NORM_PYTHON) + " " + MAGI2NORM_TUNE_REPORT_PY + " '" + record_path + "' --out '" + report + "'";
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "magi2-tune: the report failed (%s)\n", cmd.c_str());
    }
    return 0;
}
