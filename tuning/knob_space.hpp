// The search space: every knob of schedules/knobs.def and every runtime knob of
// schedules/runtime_knobs.def, with its default and legal values, read
// from their one declaration; and a configuration, a value for each knob.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace magi2norm::tuning {

// The forward's CPU and GPU schedules, the backward's CPU schedule, the runtime's thresholds.
enum class Scope { cpu, gpu, cpu_backward, runtime };

struct Knob {
    Scope scope;
    std::string name;  // as the generators (cpu_*, gpu_*, cpu_backward_*) or the build (runtime knobs) names it
    std::int64_t default_value;
    std::vector<std::int64_t> values;
    std::string meaning;
};

const std::vector<Knob> &knobs();
const Knob &knob(const std::string &name);

// Knob name -> value; a configuration holds every knob of the scopes it tunes.
using Config = std::map<std::string, std::int64_t>;

// The defaults of a scope's knobs.
Config default_config(Scope scope);

// "cpu_task_bytes=131072 cpu_chunk_bytes=32768": the knobs of `config` that differ from their
// defaults (empty for the defaults), as generator parameters and record keys.
std::string describe(const Config &config);

// A stable short key of a configuration (for caches and candidate names).
std::string config_key(const Config &config);

}  // namespace magi2norm::tuning
