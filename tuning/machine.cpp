#include "machine.hpp"

#include <sstream>
#include <string>
#include <vector>

#include "Halide.h"
#include "HalideRuntime.h"

namespace magi2norm::tuning {

namespace {

// The first of the library's CPU targets whose features the CPU has, asked of the Halide runtime
// inside the library as the multi-target objects ask it when they run.
std::string runtime_isa() {
    std::stringstream targets(MAGI2NORM_X86_TARGETS);
    std::string last;
    for (std::string t; std::getline(targets, t, ',');) {
        last = t;
        const Halide::Target target(t);
        std::vector<std::uint64_t> bits((Halide::Target::FeatureEnd + 63) / 64, 0);
        for (int f = 0; f < Halide::Target::FeatureEnd; ++f) {
            if (target.has_feature(static_cast<Halide::Target::Feature>(f))) bits[f / 64] |= std::uint64_t{1} << (f % 64);
        }
        if (halide_can_use_target_features(static_cast<int>(bits.size()), bits.data())) return t;
    }
    return last;
}

}  // namespace

Machine this_machine() {
    Machine m;
    read_cpu_keys(m, "/proc/cpuinfo", "/sys/devices/system/cpu/cpu0/cache");
    m.isa = runtime_isa();
    return m;
}

}  // namespace magi2norm::tuning
