#include "workspace.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "float_codec.hpp"
#include "splitmix64.hpp"

namespace magi2norm::bench {

namespace {

// "32768K" -> bytes.
std::size_t parse_cache_size(const std::string &text) {
    std::size_t value = std::stoull(text);
    if (text.find('K') != std::string::npos) value <<= 10;
    if (text.find('M') != std::string::npos) value <<= 20;
    return value;
}

// Draws from splitmix64 (measure/splitmix64.hpp), in the shapes the benchmark's data needs.
class Random : public measure::SplitMix64 {
public:
    using SplitMix64::SplitMix64;
    // Uniform in [0, 1).
    float unit() { return static_cast<float>(next() >> 40) * 0x1p-24f; }
};

// Magnitudes in [1/16, 4) with either sign: no zeros, no denormals, a realistic spread.
float random_value(Random &random) {
    const float magnitude = std::ldexp(1.0f + random.unit(), static_cast<int>(random.next() % 6) - 4);
    return (random.next() & 1) ? -magnitude : magnitude;
}

}  // namespace

std::size_t last_level_cache_bytes() {
    std::size_t largest = 0;
    for (int index = 0;; ++index) {
        std::ifstream size_file("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
        std::string size;
        if (!(size_file >> size)) break;
        largest = std::max(largest, parse_cache_size(size));
    }
    return largest > 0 ? largest : std::size_t{32} << 20;
}

Workspace &Workspace::of(const Case &c) {
    static std::unique_ptr<Workspace> current;
    if (!current || current->spec().name() != c.name()) {
        current.reset();
        current = std::make_unique<Workspace>(c);
    }
    return *current;
}

Workspace::Workspace(Case c) : case_(std::move(c)) {
    const std::size_t n = static_cast<std::size_t>(case_.elements());
    const std::size_t in_bytes = n * dtype_size(case_.in), out_bytes = n * dtype_size(case_.out);
    const std::size_t pair_bytes = in_bytes + out_bytes, llc = last_level_cache_bytes();
    cache_resident_ = pair_bytes <= llc / 4;
    const std::size_t pairs = cache_resident_ ? 1 : (4 * llc + pair_bytes - 1) / pair_bytes;

    Random random(0x6d616769 + static_cast<std::uint64_t>(case_.tokens));
    inputs_.emplace_back(in_bytes);
    // A block of random values, tiled: generating every element of a 1.5 GiB input would take
    // longer than measuring it. The odd block length keeps rows from repeating exactly.
    const std::size_t block = std::min<std::size_t>(n, (std::size_t{1} << 20) + 7);
    for (std::size_t i = 0; i < block; ++i) encode(case_.in, inputs_[0].data(), i, random_value(random));
    const std::size_t block_bytes = block * dtype_size(case_.in);
    for (std::size_t offset = block_bytes; offset < in_bytes; offset += block_bytes) {
        std::memcpy(inputs_[0].data() + offset, inputs_[0].data(), std::min(block_bytes, in_bytes - offset));
    }
    for (std::size_t p = 1; p < pairs; ++p) {
        inputs_.emplace_back(in_bytes);
        std::memcpy(inputs_[p].data(), inputs_[0].data(), in_bytes);
    }
    for (std::size_t p = 0; p < pairs; ++p) outputs_.emplace_back(out_bytes);

    const std::size_t weights = static_cast<std::size_t>(case_.num_modality * case_.dim());
    for (std::size_t i = 0; i < weights; ++i) {
        const std::uint16_t w = BF16::encode((random.unit() - 0.5f) * 0.5f);
        weight_.push_back(w);
        scale_.push_back(BF16::decode(BF16::encode(BF16::decode(w) + 1.0f)));
    }

    group_sizes_ = case_.group_sizes();
    if (case_.grouping == GroupingKind::ids) {
        for (std::size_t m = 0; m < group_sizes_.size(); ++m) {
            token_ids_.insert(token_ids_.end(), static_cast<std::size_t>(group_sizes_[m]), static_cast<std::int32_t>(m));
        }
        for (std::size_t i = token_ids_.size(); i > 1; --i) std::swap(token_ids_[i - 1], token_ids_[random.next() % i]);
    }
}

std::int64_t Workspace::modality_of(std::int64_t token) const {
    if (!token_ids_.empty()) return token_ids_[static_cast<std::size_t>(token)];
    std::int64_t m = 0;
    for (std::int64_t end = group_sizes_[0]; token >= end; end += group_sizes_[static_cast<std::size_t>(m)]) ++m;
    return m;
}

std::string Workspace::check(const void *out) const {
    const std::int64_t dim = case_.dim(), rows = case_.rows_per_token(), last = case_.tokens - 1;
    const double tolerance = std::max(1e-4, std::ldexp(1.0, -mantissa_bits(case_.out)));
    // The first, middle and last tokens, and the first token of every modality: a peer that
    // picked the wrong modality's scale must fail here.
    std::vector<std::int64_t> tokens{0, last / 2, last};
    for (std::int64_t m = 0; m < case_.num_modality; ++m) {
        for (std::int64_t t = 0; t <= last; ++t) {
            if (modality_of(t) == m) {
                tokens.push_back(t);
                break;
            }
        }
    }
    for (std::int64_t token : tokens) {
        const float *scale = scale_.data() + modality_of(token) * dim;
        for (std::int64_t row = token * rows; row < (token + 1) * rows; ++row) {
            const auto base = static_cast<std::size_t>(row * dim);
            double sum_squares = 0;
            for (std::int64_t d = 0; d < dim; ++d) {
                const double v = decode(case_.in, x(0), base + d);
                sum_squares += v * v;
            }
            const double inv_rms = 1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + kEps);
            for (std::int64_t d = 0; d < dim; ++d) {
                const double expected = decode(case_.in, x(0), base + d) * inv_rms * scale[d];
                const double got = decode(case_.out, out, base + d);
                if (!(std::fabs(got - expected) <= tolerance * std::fabs(expected))) {
                    return "output differs from the formula at token " + std::to_string(token) + ", element " +
                           std::to_string(base + d) + ": got " + std::to_string(got) + ", expected " +
                           std::to_string(expected);
                }
            }
        }
    }
    return {};
}

}  // namespace magi2norm::bench
