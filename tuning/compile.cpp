#include "compile.hpp"

#include <dlfcn.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

extern char **environ;

namespace magi2norm::tuning {

namespace {

// The build's features of every variant (cmake/Magi2normVariants.cmake, MAGI2NORM_FEATURES).
const std::string kFeatures = MAGI2NORM_FEATURES;

std::string plugin_of(const std::string &kind) {
    if (kind == "adams2019") return MAGI2NORM_PLUGIN_ADAMS2019;
    if (kind == "li2018") return MAGI2NORM_PLUGIN_LI2018;
    if (kind == "mullapudi2016") return MAGI2NORM_PLUGIN_MULLAPUDI2016;
    return "";
}

std::string autoscheduler_name(const std::string &kind) {
    if (kind == "adams2019") return "Adams2019";
    if (kind == "li2018") return "Li2018";
    return "Mullapudi2016";
}

std::string quoted(const std::string &s) { return "'" + s + "'"; }

// The generator's arguments for a request (after -o DIR).
std::string generator_args(const VariantRequest &r) {
    std::ostringstream a;
    a << " target=" << r.target << "-" << kFeatures << " in_type=" << dtype_name(r.in);
    if (detail::is_backward(r.form)) {
        a << " dy_type=" << dtype_name(r.out) << " dx_type=" << dtype_name(r.dx);
        if (r.form == detail::Form::backward_single) a << " sums_rows=false";
    } else {
        a << " out_type=" << dtype_name(r.out);
    }
    if (r.form == detail::Form::paired_words) a << " paired_words=true";
    if (r.streaming_alignment > 0) a << " cpu_streaming_alignment=" << r.streaming_alignment;
    if (r.native_bf16) a << " native_bf16=true";
    // Extra generator parameters for every candidate: how the tests make one whose results
    // differ (sum_steps), to check that the tuner rejects it.
    if (const char *extra = std::getenv("MAGI2NORM_TUNE_TEST_PARAMS")) a << " " << extra;
    const Schedule &s = r.schedule;
    if (!s.autoscheduled()) {
        const std::string knobs = describe(s.config);
        if (!knobs.empty()) a << " " << knobs;
        return a.str();
    }
    a << " estimate_tokens=" << s.estimate_tokens << " estimate_rows=" << s.estimate_rows << " estimate_dim=" << s.estimate_dim
      << " autoscheduler=" << autoscheduler_name(s.kind) << " autoscheduler.parallelism=" << magi2norm::num_threads();
    if (s.kind == "adams2019" && s.dropout_seed > 0) {
        a << " autoscheduler.beam_size=1 autoscheduler.random_dropout=90 autoscheduler.random_dropout_seed=" << s.dropout_seed;
    }
    return a.str();
}

// The shell command that makes `dir/name.so`.
std::string command_for(const VariantRequest &r, const std::string &dir, const std::string &name) {
    std::ostringstream c;
    const bool streaming = r.streaming_alignment > 0, ir_steps = streaming || r.native_bf16;
    const bool backward = detail::is_backward(r.form);
    c << "cd " << quoted(dir) << " && " << quoted(MAGI2NORM_GENERATOR_PATH) << " -g " << (backward ? "magi2_norm_backward" : "magi2_norm")
      << " -f " << name << " -n " << name
      << " -e object,c_header" << (ir_steps ? ",llvm_assembly" : "") << " -o .";
    if (r.schedule.autoscheduled()) c << " -p " << quoted(plugin_of(r.schedule.kind));
    c << generator_args(r);
    std::string object = name + ".o";
    if (ir_steps) {
        // As the build does it (_magi2norm_ir_library).
        c << " && " << quoted(MAGI2NORM_PYTHON) << " " << quoted(MAGI2NORM_IR_STEPS_PY);
        // The backward's dx stores only: it issues no prefetches.
        if (streaming && backward) c << " --buffer dx --alignment " << r.streaming_alignment;
        if (streaming && !backward) c << " --buffer norm --alignment " << r.streaming_alignment << " --prefetch-into-l2";
        if (r.native_bf16) c << " --native-bf16";
        c << " " << name << ".ll " << name << ".ir.o";
        object = name + ".ir.o";
    }
    c << " && " << quoted(MAGI2NORM_CXX) << " -shared -o " << name << ".so.part " << object << " && mv " << name << ".so.part "
      << name << ".so";
    return c.str();
}

// The cache's name of a candidate: a hash of everything its object is made from, the sources'
// version included, so a cache kept across an edit of generators/ or schedules/ never serves an
// object of the older sources.
std::string variant_key(const VariantRequest &r) {
    std::string text = std::string(MAGI2NORM_GENERATOR_VERSION) + r.target + generator_args(r) +
                       (r.schedule.autoscheduled() ? plugin_of(r.schedule.kind) : "");
    std::uint64_t h = 1469598103934665603ull;
    for (const char ch : text) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    static const char *digits = "0123456789abcdef";
    std::string key = "magi2_norm_tune_";
    for (int i = 0; i < 16; ++i) key += digits[(h >> (4 * i)) & 15];
    return key;
}

// A name that outlives the Variant it was made for (KernelEntry holds a plain pointer).
const char *stable_name(const std::string &name) {
    static std::set<std::string> names;
    return names.insert(name).first->c_str();
}

bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

std::string tail_of(const std::string &path, std::size_t lines) {
    std::ifstream in(path);
    std::vector<std::string> all;
    for (std::string line; std::getline(in, line);) all.push_back(line);
    std::string text;
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) text += all[i] + "\n";
    return text;
}

// Loads dir/name.so: the variant's _argv entry point.
void load_shared_object(Variant &v, const std::string &dir) {
    void *handle = dlopen((dir + "/" + v.name + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        v.error = std::string("cannot load the variant: ") + dlerror();
        return;
    }
    // The shared objects stay loaded for the process: a record may run any of them again.
    v.entry.fn = reinterpret_cast<detail::KernelFn>(dlsym(handle, (v.name + "_argv").c_str()));
    if (v.entry.fn == nullptr) v.error = "the variant has no entry point " + v.name + "_argv";
}

}  // namespace

VariantRequest request_for(const Schedule &schedule, const detail::KernelEntry &library, const std::string &target) {
    VariantRequest r;
    r.schedule = schedule;
    r.in = library.in;
    r.out = library.out;
    r.dx = library.dx;
    r.form = schedule.autoscheduled() ? detail::Form::elements : library.form;
    r.streaming_alignment = schedule.autoscheduled() ? 0 : library.streaming_alignment;
    r.native_bf16 = !schedule.autoscheduled() && library.isa == detail::Isa::avx512_bf16;
    r.target = r.native_bf16 ? MAGI2NORM_X86_BF16_TARGET : target;
    r.backend = library.backend;
    r.compute_capability = library.compute_capability;
    return r;
}

Variant Compiler::load(const std::string &name, const detail::KernelEntry &entry) const {
    Variant v;
    v.name = name;
    v.entry = entry;
    load_shared_object(v, cache_ + "/" + name);
    if (v.error.empty()) v.entry.name = stable_name(v.name);
    return v;
}

std::string Schedule::describe() const {
    if (!autoscheduled()) {
        const std::string knobs = tuning::describe(config);
        return knobs.empty() ? "defaults" : knobs;
    }
    std::string text = kind + " at " + std::to_string(estimate_tokens) + "x" + std::to_string(estimate_rows) + "x" +
                       std::to_string(estimate_dim);
    if (dropout_seed > 0) text += " sample " + std::to_string(dropout_seed);
    return text;
}

Compiler::Compiler(std::string cache, int jobs) : cache_(std::move(cache)), jobs_(jobs < 1 ? 1 : jobs) {
    std::system(("mkdir -p " + quoted(cache_)).c_str());
}

std::vector<Variant> Compiler::make(const std::vector<VariantRequest> &requests, bool load) {
    std::vector<Variant> results(requests.size());
    struct Running {
        std::size_t index;
        pid_t pid;
        std::chrono::steady_clock::time_point start;
    };
    std::vector<std::size_t> to_make;
    std::set<std::string> queued;  // a variant two requests share is made once
    for (std::size_t i = 0; i < requests.size(); ++i) {
        Variant &v = results[i];
        const VariantRequest &r = requests[i];
        v.name = variant_key(r);
        v.entry = detail::KernelEntry{r.backend, r.compute_capability, r.form, r.streaming_alignment, r.in, r.out, nullptr, nullptr};
        v.entry.dx = r.dx;
        if (!exists(cache_ + "/" + v.name + "/" + v.name + ".so") && queued.insert(v.name).second) to_make.push_back(i);
    }
    std::vector<Running> running;
    std::size_t next = 0;
    const auto wait_one = [&] {
        int status = 0;
        const pid_t pid = wait(&status);
        for (std::size_t k = 0; k < running.size(); ++k) {
            if (running[k].pid != pid) continue;
            Variant &v = results[running[k].index];
            v.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - running[k].start).count();
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                v.error = "compilation failed:\n" + tail_of(cache_ + "/" + v.name + "/log.txt", 6);
            }
            running.erase(running.begin() + static_cast<long>(k));
            return;
        }
    };
    while (next < to_make.size() || !running.empty()) {
        if (next < to_make.size() && static_cast<int>(running.size()) < jobs_) {
            const std::size_t i = to_make[next++];
            const std::string dir = cache_ + "/" + results[i].name;
            std::system(("mkdir -p " + quoted(dir)).c_str());
            const std::string cmd = "(" + command_for(requests[i], dir, results[i].name) + ") > " + quoted(dir + "/log.txt") + " 2>&1";
            const char *argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
            pid_t pid = 0;
            if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char **>(argv), environ) != 0) {
                results[i].error = "cannot start the generator";
                continue;
            }
            running.push_back({i, pid, std::chrono::steady_clock::now()});
            continue;
        }
        wait_one();
    }
    std::map<std::string, const Variant *> made;
    for (const std::size_t i : to_make) made[results[i].name] = &results[i];
    for (Variant &v : results) {
        if (const auto it = made.find(v.name); it != made.end() && it->second != &v) {
            v.error = it->second->error;
            v.compile_seconds = 0;
        }
        if (v.error.empty() && load) load_shared_object(v, cache_ + "/" + v.name);
        if (v.error.empty()) v.entry.name = stable_name(v.name);
    }
    return results;
}

}  // namespace magi2norm::tuning
