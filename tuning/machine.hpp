// What a tuning result is keyed by: the machine it was measured on.
#pragma once

#include <cstdint>
#include <string>

namespace magi2norm::tuning {

struct Machine {
    std::string cpu;   // the model name /proc/cpuinfo gives
    std::string isa;   // the Halide target of the CPU code that runs here (the multi-target objects' pick)
    int cores = 1;
    std::int64_t l1d = 0, l2 = 0, l3 = 0;  // bytes, from sysfs (0 when unknown)
    std::string gpu;                       // GPU runs: the device's name; else empty
    int compute_capability = 0;            // CUDA: major x 10 + minor
};

// This machine, as the build's record check reads it (cmake/Magi2normVariants.cmake).
Machine this_machine();

}  // namespace magi2norm::tuning
