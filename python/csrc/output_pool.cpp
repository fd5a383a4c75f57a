#include "output_pool.hpp"

#include <dlfcn.h>
#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include <torch/csrc/stable/library.h>

namespace magi2norm_torch {

namespace {

// 64 bytes: a cache line, and a multiple of the streaming-store variants' alignment. Blocks of a huge
// page or more are aligned to it and advised to take huge pages (transparent huge pages in
// `madvise` mode take only those): an activation's rows then miss the TLB once a 2 MiB page.
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kHugePage = std::size_t{2} << 20;

class Pool {
public:
    explicit Pool(std::size_t budget) : budget_(budget) {}

    void *take(std::size_t bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = kept_.find(bytes);
            if (it != kept_.end()) {
                void *block = it->second;
                kept_.erase(it);
                kept_bytes_ -= bytes;
                return block;
            }
        }
        const bool huge = bytes >= kHugePage && bytes % kHugePage == 0;
        void *block = std::aligned_alloc(huge ? kHugePage : kAlignment, bytes);
        if (block == nullptr) throw std::bad_alloc();
        if (huge) madvise(block, bytes, MADV_HUGEPAGE);
        return block;
    }

    // The block returned is kept; blocks of other sizes make room for it (a step's sizes change
    // when its token count does), and one larger than the budget is freed.
    void give(void *block, std::size_t bytes) {
        std::multimap<std::size_t, void *> evicted;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (bytes > budget_) {
                evicted.emplace(bytes, block);
            } else {
                while (kept_bytes_ + bytes > budget_) {
                    auto oldest = kept_.begin();
                    kept_bytes_ -= oldest->first;
                    evicted.insert(*oldest);
                    kept_.erase(oldest);
                }
                kept_.emplace(bytes, block);
                kept_bytes_ += bytes;
            }
        }
        for (auto &kept : evicted) std::free(kept.second);
    }

    std::size_t release() {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::size_t freed = kept_bytes_;
        for (auto &kept : kept_) std::free(kept.second);
        kept_.clear();
        kept_bytes_ = 0;
        return freed;
    }

    std::size_t kept_bytes() {
        std::lock_guard<std::mutex> lock(mutex_);
        return kept_bytes_;
    }

private:
    std::mutex mutex_;
    std::multimap<std::size_t, void *> kept_;  // by size in bytes
    std::size_t kept_bytes_ = 0;
    const std::size_t budget_;
};

std::size_t pool_budget() {
    if (const char *v = std::getenv("MAGI2NORM_POOL_BYTES")) return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
    return std::size_t{4} << 30;
}

// Never destroyed: torch may free a tensor, and so call its deleter, after this library unloads.
Pool &pool() {
    static Pool *p = new Pool(pool_budget());
    return *p;
}

// torch_from_blob of torch >= 2.11's stable ABI (torch/csrc/stable/c/shim.h).
using FromBlob = AOTITorchError (*)(void *, int64_t, const int64_t *, const int64_t *, int64_t, int32_t, int32_t, int32_t,
                                    AtenTensorHandle *, int32_t, const uint8_t *, int64_t, void (*)(void *, void *), void *);

FromBlob from_blob_function() {
    static const FromBlob function = reinterpret_cast<FromBlob>(dlsym(RTLD_DEFAULT, "torch_from_blob"));
    return function;
}

// The deleter's context is the block's size in bytes.
void give_back(void *data, void *bytes) { pool().give(data, reinterpret_cast<std::uintptr_t>(bytes)); }

}  // namespace

std::optional<torch::stable::Tensor> pooled_cpu_tensor(const std::vector<std::int64_t> &shape, torch::headeronly::ScalarType dtype) {
    const FromBlob from_blob = from_blob_function();
    if (from_blob == nullptr) return std::nullopt;
    std::size_t elements = 1;
    for (std::int64_t e : shape) elements *= static_cast<std::size_t>(e);
    const std::size_t bytes = elements * (dtype == torch::headeronly::ScalarType::Float ? 4 : 2);
    if (bytes < kMinPooledBytes) return std::nullopt;
    // A block's size is its key, and aligned_alloc wants a multiple of the alignment.
    const std::size_t unit = bytes >= kHugePage ? kHugePage : kAlignment;
    const std::size_t block_bytes = (bytes + unit - 1) / unit * unit;
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= shape[i];
    }
    void *block = pool().take(block_bytes);
    AtenTensorHandle handle = nullptr;
    const int32_t shim_dtype = torch::stable::detail::to<int32_t>(torch::stable::detail::from(dtype));
    const int32_t cpu = torch::stable::detail::to<int32_t>(torch::stable::detail::from(torch::headeronly::DeviceType::CPU));
    const int32_t strided = torch::stable::detail::to<int32_t>(torch::stable::detail::from(torch::headeronly::Layout::Strided));
    // The block is not handed back on failure: torch may have called the deleter already.
    TORCH_ERROR_CODE_CHECK(from_blob(block, static_cast<int64_t>(shape.size()), shape.data(), strides.data(), 0,
                                     shim_dtype, cpu, -1, &handle, strided, nullptr, 0, give_back,
                                     reinterpret_cast<void *>(static_cast<std::uintptr_t>(block_bytes))));
    return torch::stable::Tensor(handle);
}

std::size_t release_pool() { return pool().release(); }
std::size_t pooled_bytes() { return pool().kept_bytes(); }

}  // namespace magi2norm_torch
