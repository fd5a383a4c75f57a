#include "knob_space.hpp"

#include <stdexcept>

namespace magi2norm::tuning {

namespace {

#define MAGI2NORM_VALUES(...) {__VA_ARGS__}
std::vector<Knob> make_knobs() {
    std::vector<Knob> all;
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning) all.push_back({Scope::cpu, "cpu_" #name, value, MAGI2NORM_VALUES values, meaning});
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning) all.push_back({Scope::gpu, "gpu_" #name, value, MAGI2NORM_VALUES values, meaning});
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning) \
    all.push_back({Scope::cpu_backward, "cpu_backward_" #name, value, MAGI2NORM_VALUES values, meaning});
#define MAGI2NORM_RUNTIME_KNOB(name, value, values, meaning) all.push_back({Scope::runtime, #name, value, MAGI2NORM_VALUES values, meaning});
#include "knobs.def"
#include "runtime_knobs.def"
    return all;
}
#undef MAGI2NORM_VALUES

}  // namespace

const std::vector<Knob> &knobs() {
    static const std::vector<Knob> all = make_knobs();
    return all;
}

const Knob &knob(const std::string &name) {
    for (const Knob &k : knobs()) {
        if (k.name == name) return k;
    }
    throw std::invalid_argument("no knob named " + name + " in schedules/knobs.def or runtime_knobs.def");
}

Config default_config(Scope scope) {
    Config c;
    for (const Knob &k : knobs()) {
        if (k.scope == scope) c[k.name] = k.default_value;
    }
    return c;
}

std::string describe(const Config &config) {
    std::string text;
    for (const auto &[name, value] : config) {
        if (value == knob(name).default_value) continue;
        text += (text.empty() ? "" : " ") + name + "=" + std::to_string(value);
    }
    return text;
}

std::string config_key(const Config &config) {
    // FNV-1a over the description: the defaults share one key whatever scopes a config holds.
    std::uint64_t h = 1469598103934665603ull;
    for (const char c : describe(config)) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    static const char *digits = "0123456789abcdef";
    std::string key;
    for (int i = 0; i < 12; ++i) key += digits[(h >> (4 * i)) & 15];
    return key;
}

}  // namespace magi2norm::tuning
