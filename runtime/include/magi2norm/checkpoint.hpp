// Norm weights from safetensors checkpoints, by key.
//
//   auto ckpt = magi2norm::Checkpoint::open("model.safetensors");
//   magi2norm::RMSNorm pre = ckpt.load("block.layers.0.attention.pre_norm", {3072, 1e-6f, 3});
//   auto norms = ckpt.load_all("block.layers.0.", [](const std::string &module)
//       -> std::optional<magi2norm::NormConfig> { ... });   // "attention.pre_norm" -> RMSNorm, ...
//
// A module's weight is the tensor "<module>.weight": F32, BF16 or F16, any shape with
// num_modality * num_patterns * dim elements ([D], [P, D], [M, P, D], [M*P*D], ...), modality-major
// as SPEC.md stores it. The file is memory-mapped and validated when opened; a loaded norm keeps
// its own scale, so it outlives the Checkpoint. Errors: Error(io) for a file that cannot be read,
// Error(format) for a malformed one, Error(weight) for a missing key or a weight of the wrong
// dtype or size.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "magi2norm/magi2norm.hpp"
#include "magi2norm/safetensors.hpp"

namespace magi2norm {

class Checkpoint {
public:
    static Checkpoint open(const std::string &path);
    explicit Checkpoint(safetensors::File file);

    const safetensors::File &file() const { return file_; }

    // The checked weight of `module` for `config`: a view into the mapping, valid while this
    // Checkpoint lives.
    ConstTensorView weight(const std::string &module, const NormConfig &config) const;
    // A norm with `config` and the weight of `module`.
    RMSNorm load(const std::string &module, const NormConfig &config) const;

    // Says which modules are norms, and how they are built: nullopt for a module that is not one.
    using ConfigFor = std::function<std::optional<NormConfig>(const std::string &module)>;
    // Every norm whose weight key starts with `prefix` (a plain string prefix: end it with "." to
    // mean the modules inside one module), keyed by module path with the prefix removed.
    // `config_for` sees that relative path too. Error(weight) when no key starts with `prefix`.
    std::map<std::string, RMSNorm> load_all(const std::string &prefix, const ConfigFor &config_for) const;
    // The norms named in `configs` (relative module path -> config), each of which must exist.
    std::map<std::string, RMSNorm> load_all(const std::string &prefix,
                                            const std::map<std::string, NormConfig> &configs) const;

private:
    safetensors::File file_;
};

}  // namespace magi2norm
