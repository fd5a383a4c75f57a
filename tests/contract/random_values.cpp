#include "random_values.hpp"

#include <cmath>

namespace contract {
namespace {

// Binade ranges (powers of two) for a row, for each element below the row's, and for a spike.
// Rows run from where eps is comparable to the mean square (2^-12 and below) to where it does
// not matter at all; squares stay finite and normal in FP32, and FP16 inputs stay in range.
struct Spread {
    int row_min, row_max, element, spike;
};

Spread spread_of(ref::DType dtype) {
    return dtype == ref::DType::f16 ? Spread{-8, 4, 2, 6} : Spread{-12, 40, 4, 12};
}

}  // namespace

void fill_random_input(ref::HostTensor &tensor, Rng &rng) {
    const Spread spread = spread_of(tensor.dtype());
    const std::int64_t row_length = tensor.shape().empty() ? 1 : tensor.shape().back();
    for (std::int64_t start = 0; start < tensor.size(); start += row_length) {
        const int row_exponent = static_cast<int>(rng.integer(spread.row_min, spread.row_max));
        const bool spiky = rng.integer(0, 7) == 0;
        const std::int64_t spike_at = rng.integer(0, row_length - 1);
        for (std::int64_t d = 0; d < row_length; ++d) {
            int exponent = row_exponent + static_cast<int>(rng.integer(-spread.element, 0));
            if (spiky && d == spike_at) exponent += spread.spike;
            tensor.set(start + d, static_cast<float>(std::ldexp(rng.uniform(-1.0, 1.0), exponent)));
        }
    }
}

ref::HostTensor random_input(ref::DType dtype, const ref::Shape &shape, Rng &rng) {
    ref::HostTensor tensor(dtype, shape);
    fill_random_input(tensor, rng);
    return tensor;
}

ref::HostTensor random_weight(ref::DType dtype, const ref::Shape &shape, Rng &rng) {
    ref::HostTensor weight(dtype, shape);
    for (std::int64_t i = 0; i < weight.size(); ++i) weight.set(i, static_cast<float>(rng.uniform(-1.0, 1.0)));
    return weight;
}

std::vector<std::int32_t> random_ids(std::int64_t num_tokens, std::int64_t num_modality, Rng &rng) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(num_tokens));
    for (auto &id : ids) id = static_cast<std::int32_t>(rng.integer(0, num_modality - 1));
    return ids;
}

std::vector<std::int64_t> random_sizes_with_empty(std::int64_t num_tokens, std::int64_t num_modality,
                                                  std::int64_t empty, Rng &rng) {
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(num_modality), 0);
    for (std::int64_t t = 0; t < num_tokens; ++t) {
        std::int64_t m = rng.integer(0, num_modality - 2);
        if (m >= empty) ++m;  // skip the empty group
        ++sizes[static_cast<std::size_t>(m)];
    }
    return sizes;
}

std::vector<std::int64_t> bincount(const std::vector<std::int32_t> &ids, std::int64_t num_modality) {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(num_modality), 0);
    for (std::int32_t id : ids) ++counts[static_cast<std::size_t>(id)];
    return counts;
}

}  // namespace contract
