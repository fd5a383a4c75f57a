#include "norm_cache.hpp"

#include <cstring>
#include <list>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/csrc/stable/ops.h>

#include "torch_runtime.hpp"
#include "torch_tensors.hpp"

namespace magi2norm_torch {

namespace {

struct Key {
    const void *data;
    std::optional<std::int64_t> version;
    std::vector<std::int64_t> sizes, strides;
    std::int64_t dim, num_modality, num_patterns;
    std::uint32_t eps_bits;
    int dtype;

    bool operator==(const Key &o) const {
        return std::tie(data, version, sizes, strides, dim, num_modality, num_patterns, eps_bits, dtype) ==
               std::tie(o.data, o.version, o.sizes, o.strides, o.dim, o.num_modality, o.num_patterns, o.eps_bits, o.dtype);
    }
};

struct Entry {
    Key key;
    torch::stable::Tensor weight;  // held: its address stays its own while the entry lives
    std::shared_ptr<const magi2norm::RMSNorm> norm;
};

std::mutex mutex;
std::list<Entry> entries;  // most recently used first

Key key_of(const torch::stable::Tensor &weight, const magi2norm::NormConfig &config) {
    std::uint32_t eps_bits = 0;
    std::memcpy(&eps_bits, &config.eps, sizeof eps_bits);
    return {weight.data_ptr(), tensor_version(weight), {weight.sizes().begin(), weight.sizes().end()},
            {weight.strides().begin(), weight.strides().end()}, config.dim, config.num_modality, config.num_patterns, eps_bits, static_cast<int>(weight.scalar_type())};
}

std::shared_ptr<const magi2norm::RMSNorm> make_norm(const torch::stable::Tensor &weight, const magi2norm::NormConfig &config) {
    // The library reads the weight on the host, once per version.
    const torch::stable::Tensor host =
        weight.is_cpu() ? weight : torch::stable::to(weight, torch::stable::Device(torch::headeronly::DeviceType::CPU));
    return std::make_shared<const magi2norm::RMSNorm>(config, view_of(host, "weight"));
}

}  // namespace

std::shared_ptr<const magi2norm::RMSNorm> norm_for(const torch::stable::Tensor &weight, const magi2norm::NormConfig &config) {
    const Key key = key_of(weight, config);
    {
        std::lock_guard<std::mutex> lock(mutex);
        for (auto it = entries.begin(); it != entries.end(); ++it) {
            if (it->key == key) {
                entries.splice(entries.begin(), entries, it);
                return it->norm;
            }
        }
    }
    auto norm = make_norm(weight, config);
    std::lock_guard<std::mutex> lock(mutex);
    entries.push_front(Entry{key, weight, norm});
    if (entries.size() > kMaxNorms) entries.pop_back();
    return norm;
}

std::int64_t clear_norms() {
    std::list<Entry> dropped;
    {
        std::lock_guard<std::mutex> lock(mutex);
        dropped.swap(entries);
    }
    return static_cast<std::int64_t>(dropped.size());
}

}  // namespace magi2norm_torch
