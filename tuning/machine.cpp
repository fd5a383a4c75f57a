#include "machine.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "Halide.h"
#include "HalideRuntime.h"

namespace magi2norm::tuning {

namespace {

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) != 0) continue;
        const auto colon = line.find(':');
        std::string name = colon == std::string::npos ? "" : line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(" \t"));
        return name;
    }
    return "unknown";
}

// "48K", "2048K", "480M" -> bytes.
std::int64_t cache_bytes(int index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text)) return 0;
    std::int64_t value = std::stoll(text);
    if (text.find('K') != std::string::npos) value <<= 10;
    if (text.find('M') != std::string::npos) value <<= 20;
    return value;
}

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
    m.cpu = cpu_model_name();
    m.isa = runtime_isa();
    m.cores = static_cast<int>(std::thread::hardware_concurrency());
    // index0 L1d, index1 L1i, index2 L2, index3 L3 on x86 Linux.
    m.l1d = cache_bytes(0);
    m.l2 = cache_bytes(2);
    m.l3 = cache_bytes(3);
    return m;
}

}  // namespace magi2norm::tuning
