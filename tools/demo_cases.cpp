#include "demo_cases.hpp"

#include <cstring>

#include "magi2norm/float_codecs.hpp"
#include "model_norms.hpp"
#include "splitmix64.hpp"

namespace magi2norm::cli {
namespace {

// Draws from splitmix64 (measure/splitmix64.hpp), in the shapes the demo's data needs.
class Random : public measure::SplitMix64 {
public:
    using SplitMix64::SplitMix64;
    // Uniform in (-range, range) and never zero: with k < 2^23, (2k + 1) / 2^23 - 1 is an odd
    // multiple of 2^-23 (exact in FP32).
    float nonzero(float range) {
        const auto k = static_cast<float>(next() >> 41);
        return ((2.0f * k + 1.0f) / 8388608.0f - 1.0f) * range;
    }
};

// `count` random values of `dtype` in (-range, range); BF16 rounding keeps them nonzero.
std::vector<unsigned char> random_tensor(Random &random, std::int64_t count, DType dtype, float range) {
    std::vector<unsigned char> bytes(static_cast<std::size_t>(count) * dtype_size(dtype));
    for (std::int64_t i = 0; i < count; ++i) {
        const float value = random.nonzero(range);
        if (dtype == DType::bf16) {
            const std::uint16_t bits = f32_to_bf16(value);
            std::memcpy(bytes.data() + 2 * i, &bits, 2);
        } else {
            std::memcpy(bytes.data() + 4 * i, &value, 4);
        }
    }
    return bytes;
}

}  // namespace

std::vector<DemoCase> model_cases(std::int64_t t) {
    using K = Grouping::Kind;
    std::vector<DemoCase> cases;
    for (const measure::ModelNorm &n : measure::model_norms()) {
        std::vector<std::int64_t> shape{t};
        shape.insert(shape.end(), n.row.begin(), n.row.end());
        // The weight in x's dtype, as the model's checkpoints hold it.
        cases.push_back({n.label(), shape, n.x, n.out, n.x, 1, K::none});
        // The pre-norm also by groups: the model's first and last two layers.
        if (n.name == "pre_norm") {
            cases.push_back({n.label() + "/M3_sizes", shape, n.x, n.out, n.x, 3, K::sizes});
            cases.push_back({n.label() + "/M3_ids", shape, n.x, n.out, n.x, 3, K::ids});
        }
    }
    return cases;
}

DemoData make_demo_data(const DemoCase &c, std::uint64_t seed) {
    Random random(seed);
    DemoData data;
    const std::int64_t tokens = c.shape.front();
    // Activations of a few units; weights near 0, i.e. scales near 1, as trained checkpoints have.
    data.x = random_tensor(random, element_count(c.shape), c.in_dtype, 4.0f);
    data.weight = random_tensor(random, c.num_modality * c.shape.back(), c.weight_dtype, 0.25f);
    if (c.grouping == Grouping::Kind::ids) {
        data.ids.resize(static_cast<std::size_t>(tokens));
        for (std::int32_t &id : data.ids) id = static_cast<std::int32_t>(random.next() % c.num_modality);
    } else if (c.grouping == Grouping::Kind::sizes) {
        // Video first and largest; the audio and text groups take T / 2M tokens each.
        const std::int64_t small = tokens / (2 * c.num_modality);
        data.sizes.assign(static_cast<std::size_t>(c.num_modality), small);
        data.sizes[0] = tokens - (c.num_modality - 1) * small;
    }
    return data;
}

Grouping DemoData::grouping(const DemoCase &c) const {
    switch (c.grouping) {
    case Grouping::Kind::ids: return Grouping::ids(ids.data(), static_cast<std::int64_t>(ids.size()));
    case Grouping::Kind::sizes: return Grouping::sizes(sizes);
    case Grouping::Kind::none: break;
    }
    return Grouping::none();
}

std::int64_t DemoData::modality(std::int64_t token) const {
    if (!ids.empty()) return ids[static_cast<std::size_t>(token)];
    std::int64_t end = 0;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        end += sizes[m];
        if (token < end) return static_cast<std::int64_t>(m);
    }
    return 0;
}

const char *grouping_name(Grouping::Kind kind) {
    switch (kind) {
    case Grouping::Kind::sizes: return "sizes";
    case Grouping::Kind::ids: return "ids";
    case Grouping::Kind::none: break;
    }
    return "none";
}

}  // namespace magi2norm::cli
