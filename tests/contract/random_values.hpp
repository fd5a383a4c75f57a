// Deterministic random inputs for the contract tests: values over a range of magnitudes (per row
// and per element), weights in [-1, 1], modality ids and group sizes with empty groups.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "reference/host_tensor.hpp"

namespace contract {

class Rng {
public:
    explicit Rng(std::uint64_t seed) : engine_(seed) {}
    double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine_); }
    std::int64_t integer(std::int64_t lo, std::int64_t hi) {  // inclusive
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(engine_);
    }
    std::mt19937_64 &engine() { return engine_; }

private:
    std::mt19937_64 engine_;
};

// Values whose rows differ in magnitude by many binades (within what `dtype` represents), each
// element spread over a few more, some rows dominated by one large element.
ref::HostTensor random_input(ref::DType dtype, const ref::Shape &shape, Rng &rng);
// Fills an existing tensor the same way (for memory laid out by the test).
void fill_random_input(ref::HostTensor &tensor, Rng &rng);
// Weight values uniform in [-1, 1], rounded to `dtype`.
ref::HostTensor random_weight(ref::DType dtype, const ref::Shape &shape, Rng &rng);
// `num_tokens` ids uniform in [0, num_modality), in no particular order.
std::vector<std::int32_t> random_ids(std::int64_t num_tokens, std::int64_t num_modality, Rng &rng);
// Sizes of `num_modality` groups summing to `num_tokens`, group `empty` being empty.
std::vector<std::int64_t> random_sizes_with_empty(std::int64_t num_tokens, std::int64_t num_modality,
                                                  std::int64_t empty, Rng &rng);
// bincount(ids, minlength=num_modality), computed here rather than by the library.
std::vector<std::int64_t> bincount(const std::vector<std::int32_t> &ids, std::int64_t num_modality);

}  // namespace contract
