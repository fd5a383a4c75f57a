// What a tuning result is keyed by: the machine it was measured on. A build takes a CPU record
// only on a machine with the same keys (cmake/check_tuning_record.cmake reads them the same way,
// from /proc/cpuinfo and sysfs, in cmake/Magi2normMachine.cmake).
#pragma once

#include <cstdint>
#include <string>

namespace magi2norm::tuning {

struct Machine {
    std::string cpu = "unknown";     // the model name /proc/cpuinfo gives
    std::string vendor = "unknown";  // its vendor_id
    int family = -1, model = -1, stepping = -1;  // its cpu family, model, stepping (-1 when absent)
    std::string isa;   // the Halide target of the CPU code that runs here (the multi-target objects' pick)
    int cores = 1;     // physical cores: distinct (physical id, core id) pairs (the threads when absent)
    int threads = 1;   // logical processors: its "processor" entries
    std::int64_t l1d = 0, l2 = 0, l3 = 0;  // bytes, from sysfs (0 when unknown)
    std::string gpu;                       // GPU runs: the device's name; else empty
    int compute_capability = 0;            // CUDA: major x 10 + minor
};

// This machine, as the build's record check reads it (machine.cpp: the isa asks Halide).
Machine this_machine();

// Fills every key but the isa from a /proc/cpuinfo file and a sysfs cache folder
// (/sys/devices/system/cpu/cpu0/cache: index*/level, type, size).
void read_cpu_keys(Machine &m, const std::string &cpuinfo, const std::string &cache_dir);

// The first key in which a CPU record's machine differs from this one, in the configure's order
// and spelling ("machine.caches.l3: the record's 33554432, this machine's 16777216"); empty when
// none does.
std::string machine_difference(const Machine &record, const Machine &here);

}  // namespace magi2norm::tuning
