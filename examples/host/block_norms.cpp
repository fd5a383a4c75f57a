#include "block_norms.hpp"

#include <cstring>
#include <map>
#include <optional>

#include <magi2norm/checkpoint.hpp>
#include <magi2norm/safetensors.hpp>

namespace block_norms {

const std::string kLayerPrefix = "block.layers.0.";

namespace {

using magi2norm::DType;

constexpr std::int64_t kTokens = 48;
constexpr std::int64_t kHidden = 3072;
constexpr std::int64_t kHeads = 24;
constexpr std::int64_t kHeadDim = 128;
constexpr std::int64_t kModalities = 3;
constexpr float kEps = 1e-6f;

// splitmix64: the same numbers on every platform and standard library.
class Numbers {
public:
    explicit Numbers(std::uint64_t seed) : state_(seed) {}
    // Uniform in [lo, hi).
    float uniform(float lo, float hi) {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        return lo + (hi - lo) * static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    }

private:
    std::uint64_t state_;
};

// Stores `v` in `dtype`. The 16-bit formats take it truncated toward zero, an exact value of the
// format, which spares the example a rounding routine; the values here are in F16's normal range
// or below it (flushed to zero).
void store(DType dtype, unsigned char *p, float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    std::uint16_t bits = 0;
    switch (dtype) {
    case DType::f32: std::memcpy(p, &v, sizeof v); return;
    case DType::bf16: bits = static_cast<std::uint16_t>(u >> 16); break;
    case DType::f16: {
        const std::uint32_t exponent = (u >> 23) & 0xffu;
        const std::uint32_t magnitude = exponent < 113 ? 0 : ((exponent - 112) << 10) | ((u >> 13) & 0x3ffu);
        bits = static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | magnitude);
        break;
    }
    }
    std::memcpy(p, &bits, sizeof bits);
}

// Activations whose rows differ in scale (2^-3 .. 2^3), as hidden states do.
Tensor activations(DType dtype, std::vector<std::int64_t> shape, std::uint64_t seed) {
    Tensor t(dtype, std::move(shape));
    Numbers numbers(seed);
    const std::int64_t row = t.shape.back();
    const std::size_t elem = magi2norm::dtype_size(dtype);
    for (std::size_t i = 0; i < t.bytes.size() / elem; ++i) {
        const float scale = static_cast<float>(1 << ((static_cast<std::int64_t>(i) / row) % 7)) / 8.0f;
        store(dtype, &t.bytes[i * elem], scale * numbers.uniform(-1.0f, 1.0f));
    }
    return t;
}

Tensor weights(DType dtype, std::vector<std::int64_t> shape, std::uint64_t seed) {
    Tensor t(dtype, std::move(shape));
    Numbers numbers(seed);
    const std::size_t elem = magi2norm::dtype_size(dtype);
    for (std::size_t i = 0; i < t.bytes.size() / elem; ++i) store(dtype, &t.bytes[i * elem], numbers.uniform(-0.5f, 0.5f));
    return t;
}

// Which modality each token belongs to: interleaved, as the model's packed sequences are.
std::vector<std::int32_t> modality_mapping() {
    std::vector<std::int32_t> mapping(kTokens);
    for (std::int64_t t = 0; t < kTokens; ++t) mapping[t] = static_cast<std::int32_t>((t * 5 + t / 7) % kModalities);
    return mapping;
}

// The block's norms by module path (relative to kLayerPrefix); other modules are not norms.
std::optional<magi2norm::NormConfig> config_for(const std::string &module) {
    auto ends_with = [&](const std::string &suffix) {
        return module.size() >= suffix.size() && module.compare(module.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with("pre_norm")) return magi2norm::NormConfig{kHidden, kEps, kModalities};
    if (ends_with("q_norm")) return magi2norm::NormConfig{kHeadDim, kEps, kModalities, 1, DType::f32};
    if (ends_with("k_norm")) return magi2norm::NormConfig{kHeadDim, kEps, 1, 1, DType::f32};
    return std::nullopt;
}

// The model's way with M > 1: sort the tokens by modality, norm the groups, restore the order.
Tensor by_dispatcher(const magi2norm::RMSNorm &norm, const magi2norm::ModalityDispatcher &dispatcher, const Tensor &x,
                     std::optional<DType> out_dtype = std::nullopt) {
    Tensor sorted(x.dtype, x.shape);
    dispatcher.dispatch(x.view(), sorted.view());
    const DType y_dtype = norm.output_dtype(x.dtype, out_dtype);
    Tensor sorted_y(y_dtype, norm.output_shape(x.shape));
    norm.forward(sorted.view(), magi2norm::Grouping::from(dispatcher), sorted_y.view(), out_dtype);
    Tensor y(y_dtype, sorted_y.shape);
    dispatcher.undispatch(sorted_y.view(), y.view());
    return y;
}

Tensor direct(const magi2norm::RMSNorm &norm, const Tensor &x, const magi2norm::Grouping &grouping) {
    Tensor y(norm.output_dtype(x.dtype), norm.output_shape(x.shape));
    norm.forward(x.view(), grouping, y.view());
    return y;
}

}  // namespace

Tensor::Tensor(DType dtype_, std::vector<std::int64_t> shape_)
    : dtype(dtype_), shape(std::move(shape_)),
      bytes(static_cast<std::size_t>(magi2norm::element_count(shape)) * magi2norm::dtype_size(dtype)) {}

void write_checkpoint(const std::string &path) {
    const std::map<std::string, Tensor> tensors = {
        {kLayerPrefix + "attention.pre_norm.weight", weights(DType::bf16, {kModalities, kHidden}, 1)},
        {kLayerPrefix + "attention.proj.weight", weights(DType::bf16, {16, 16}, 2)},
        {kLayerPrefix + "attention.q_norm.weight", weights(DType::f32, {kModalities, 1, kHeadDim}, 3)},
        {kLayerPrefix + "attention.k_norm.weight", weights(DType::f16, {kHeadDim}, 4)},
        {kLayerPrefix + "mlp.pre_norm.weight", weights(DType::f32, {kModalities * kHidden}, 5)},
        {kLayerPrefix + "mlp.fc1.bias", weights(DType::f32, {64}, 6)},
        {"block.layers.1.attention.pre_norm.weight", weights(DType::bf16, {kHidden}, 7)},
    };
    std::vector<magi2norm::safetensors::OutputTensor> out;
    for (const auto &[name, t] : tensors) {
        out.push_back({name, magi2norm::safetensors::dtype_tag(t.dtype), t.shape, t.bytes.data()});
    }
    magi2norm::safetensors::write(path, out, {{"format", "pt"}});
}

std::vector<Step> run(const std::string &checkpoint_path) {
    const auto checkpoint = magi2norm::Checkpoint::open(checkpoint_path);
    const std::map<std::string, magi2norm::RMSNorm> norms = checkpoint.load_all(kLayerPrefix, config_for);
    const std::vector<std::int32_t> mapping = modality_mapping();
    const magi2norm::ModalityDispatcher dispatcher(mapping.data(), kTokens, kModalities);

    std::vector<Step> steps;
    auto add = [&](const std::string &module, Tensor x, const std::vector<std::int32_t> &modality, auto &&apply) {
        const magi2norm::RMSNorm &norm = norms.at(module);
        Tensor y = apply(norm, x);
        steps.push_back({module, norm.config(), std::move(x), modality, std::move(y)});
    };
    // Pre-norm over three modalities, grouped by the dispatcher; BF16 in and out.
    add("attention.pre_norm", activations(DType::bf16, {kTokens, kHidden}, 11), mapping,
        [&](const magi2norm::RMSNorm &norm, const Tensor &x) { return by_dispatcher(norm, dispatcher, x); });
    // Q norm [T, 24, 128], one scale row per modality broadcast over the heads, grouped by the
    // per-token ids in the original order; BF16 in, F32 out.
    add("attention.q_norm", activations(DType::bf16, {kTokens, kHeads, kHeadDim}, 12), mapping,
        [&](const magi2norm::RMSNorm &norm, const Tensor &x) {
            return direct(norm, x, magi2norm::Grouping::ids(mapping.data(), kTokens));
        });
    // K norm, one modality, F16 weight.
    add("attention.k_norm", activations(DType::bf16, {kTokens, kHeads, kHeadDim}, 13), {},
        [&](const magi2norm::RMSNorm &norm, const Tensor &x) { return direct(norm, x, magi2norm::Grouping::none()); });
    // MLP pre-norm on an F32 residual stream, BF16 out by a per-call override.
    add("mlp.pre_norm", activations(DType::f32, {kTokens, kHidden}, 14), mapping,
        [&](const magi2norm::RMSNorm &norm, const Tensor &x) { return by_dispatcher(norm, dispatcher, x, DType::bf16); });
    return steps;
}

std::uint64_t checksum(const std::vector<Step> &steps) {
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (const Step &step : steps) {
        for (const unsigned char byte : step.y.bytes) hash = (hash ^ byte) * 0x100000001b3ull;
    }
    return hash;
}

}  // namespace block_norms
