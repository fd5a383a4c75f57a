#include "magi2norm/checkpoint.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "../views/views.hpp"

namespace magi2norm {

namespace {

// constexpr, not a std::string: a host's static initialiser may load a checkpoint before a
// dynamically initialised constant of this file is set up.
constexpr std::string_view kWeightSuffix = ".weight";

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

Checkpoint Checkpoint::open(const std::string &path) { return Checkpoint(safetensors::File::open(path)); }

Checkpoint::Checkpoint(safetensors::File file) : file_(std::move(file)) {}

ConstTensorView Checkpoint::weight(const std::string &module, const NormConfig &config) const {
    const std::string key = module + std::string(kWeightSuffix);
    const std::string where = file_.path() + ": ";
    if (!file_.contains(key)) throw Error(ErrorCode::weight, where + "no tensor '" + key + "' (the weight of '" + module + "')");
    const safetensors::TensorInfo &info = file_.tensor(key);
    if (!safetensors::dtype_from_tag(info.dtype)) {
        throw Error(ErrorCode::weight, where + "tensor '" + key + "' has dtype " + info.dtype +
                                           "; a norm weight is F32, BF16 or F16");
    }
    std::int64_t want;
    if (__builtin_mul_overflow(config.num_modality, config.num_patterns, &want) ||
        __builtin_mul_overflow(want, config.dim, &want)) {
        throw Error(ErrorCode::overflow, "num_modality * num_patterns * dim overflows");
    }
    const std::int64_t have = element_count(info.shape);
    if (have != want) {
        throw Error(ErrorCode::weight, where + "tensor '" + key + "' has shape " + detail::shape_string(info.shape) + " (" +
                                           std::to_string(have) + " elements) but num_modality " +
                                           std::to_string(config.num_modality) + " * num_patterns " +
                                           std::to_string(config.num_patterns) + " * dim " + std::to_string(config.dim) +
                                           " = " + std::to_string(want));
    }
    return file_.view(key);
}

RMSNorm Checkpoint::load(const std::string &module, const NormConfig &config) const {
    return RMSNorm(config, weight(module, config));
}

std::map<std::string, RMSNorm> Checkpoint::load_all(const std::string &prefix, const ConfigFor &config_for) const {
    std::map<std::string, RMSNorm> norms;
    bool any_under_prefix = false;
    for (const std::string &key : file_.names()) {
        if (!starts_with(key, prefix)) continue;
        any_under_prefix = true;
        // The module name sits between the prefix and ".weight"; a key with none (the weight of
        // the prefix itself, "a.b.weight" under "a.b." or "a.b") is not a module under it.
        if (!ends_with(key, kWeightSuffix) || key.size() <= prefix.size() + kWeightSuffix.size()) continue;
        const std::string module = key.substr(prefix.size(), key.size() - prefix.size() - kWeightSuffix.size());
        if (const std::optional<NormConfig> config = config_for(module)) norms.emplace(module, load(prefix + module, *config));
    }
    if (!any_under_prefix) throw Error(ErrorCode::weight, file_.path() + ": no tensor key starts with '" + prefix + "'");
    return norms;
}

std::map<std::string, RMSNorm> Checkpoint::load_all(const std::string &prefix,
                                                    const std::map<std::string, NormConfig> &configs) const {
    std::map<std::string, RMSNorm> norms;
    for (const auto &[module, config] : configs) norms.emplace(module, load(prefix + module, config));
    return norms;
}

}  // namespace magi2norm
