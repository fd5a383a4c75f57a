// splitmix64: a fast generator, reproducible across runs and machines, for the synthetic tensors
// of the demo and of the benchmarks (hundreds of millions of values per run).
#pragma once

#include <cstdint>

namespace magi2norm::measure {

class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

private:
    std::uint64_t state_;
};

}  // namespace magi2norm::measure
