#include "output_pool.hpp"

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <dlpack/dlpack.h>

namespace magi2norm_python {
namespace {

// 64 bytes: a cache line, and the streaming-store variants' 32-byte alignment.
constexpr std::size_t kAlignment = 64;

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
        void *block = std::aligned_alloc(kAlignment, bytes);
        if (block == nullptr) throw std::bad_alloc();
        return block;
    }

    // The block returned is kept; older blocks of other sizes make room for it (a step's sizes
    // change when its token count does), and one larger than the budget is freed.
    void give(void *block, std::size_t bytes) {
        std::vector<void *> evicted;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (bytes > budget_) {
                evicted.push_back(block);
            } else {
                while (kept_bytes_ + bytes > budget_) {
                    auto oldest = kept_.begin();
                    kept_bytes_ -= oldest->first;
                    evicted.push_back(oldest->second);
                    kept_.erase(oldest);
                }
                kept_.emplace(bytes, block);
                kept_bytes_ += bytes;
            }
        }
        for (void *b : evicted) std::free(b);
    }

    std::size_t release() {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::size_t freed = kept_bytes_;
        for (auto &[bytes, block] : kept_) std::free(block);
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
    std::unordered_multimap<std::size_t, void *> kept_;  // by size in bytes
    std::size_t kept_bytes_ = 0;
    const std::size_t budget_;
};

// Never destroyed: torch may free a tensor, and so call its deleter, after the module unloads.
Pool &pool() {
    static Pool *p = new Pool(pool_budget());
    return *p;
}

// One tensor's DLPack record, its shape and its block.
struct Owned {
    DLManagedTensor managed{};
    std::vector<std::int64_t> shape;
    std::size_t bytes = 0;
};

void delete_owned(DLManagedTensor *managed) {
    auto *owned = static_cast<Owned *>(managed->manager_ctx);
    pool().give(managed->dl_tensor.data, owned->bytes);
    delete owned;
}

// A capsule torch never consumed (still named "dltensor") frees its tensor itself.
void capsule_destructor(PyObject *capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        auto *managed = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule, "dltensor"));
        managed->deleter(managed);
    }
}

}  // namespace

std::size_t pool_budget() {
    if (const char *v = std::getenv("MAGI2NORM_POOL_BYTES")) return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
    return std::size_t{4} << 30;
}

PyObject *pooled_tensor(const std::vector<std::int64_t> &shape, std::uint8_t code, std::uint8_t bits) {
    auto *owned = new Owned;
    owned->shape = shape;
    std::size_t elements = 1;
    for (std::int64_t e : shape) elements *= static_cast<std::size_t>(e);
    // At least one aligned unit: a block's size is its key, and aligned_alloc wants a multiple.
    const std::size_t bytes = elements * bits / 8;
    owned->bytes = ((bytes + kAlignment - 1) / kAlignment) * kAlignment;
    if (owned->bytes == 0) owned->bytes = kAlignment;
    DLTensor &t = owned->managed.dl_tensor;
    try {
        t.data = pool().take(owned->bytes);
    } catch (...) {
        delete owned;
        throw;
    }
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int>(shape.size());
    t.dtype = DLDataType{code, bits, 1};
    t.shape = owned->shape.data();
    t.strides = nullptr;  // C-contiguous
    t.byte_offset = 0;
    owned->managed.manager_ctx = owned;
    owned->managed.deleter = delete_owned;
    PyObject *capsule = PyCapsule_New(&owned->managed, "dltensor", capsule_destructor);
    if (capsule == nullptr) delete_owned(&owned->managed);
    return capsule;
}

std::size_t release_pool() { return pool().release(); }
std::size_t pooled_bytes() { return pool().kept_bytes(); }

}  // namespace magi2norm_python
