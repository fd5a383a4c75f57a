// The weight gradient's partial sums: their per-thread storage, the fixed-order sum of a
// modality's blocks, and dweight written from the sums in its dtype, layout and memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../devices/halide_calls.hpp"
#include "backward_plan.hpp"

namespace magi2norm::detail {

// Tokens per block of the weight gradient's partial sums, a function of the shape only, never of
// the thread count or the backend, for tokens that add `rows` products (heads a pattern x middle
// rows) to each scale row: max(1, abi::kPartialTerms / rows) (backward_abi.h), so an FP32 partial
// adds at most kPartialTerms products, on every target.
std::int64_t partial_block_tokens(std::int64_t rows);

// One modality's dscale (`row` = P * D values) from its FP32 partials [blocks][row]: the blocks
// added in block order in FP64 (`sum`, row doubles of scratch), rounded to FP32 once.
void add_partials(const float *partials, std::int64_t blocks, std::int64_t row, double *sum, float *dscale);


// The partials' storage. Each calling thread keeps its own, sized to its largest call, so later
// calls neither map nor zero fresh pages (mHC at T = 32768: 50 MB, 12,000 page faults a call
// when allocated per call). A call that starts on a thread whose storage is in use (a host loop
// that runs other work on the waiting thread) allocates its own.
class PartialsStorage {
public:
    PartialsStorage() : shared_(!thread_storage().in_use) {
        if (shared_) thread_storage().in_use = true;
    }
    ~PartialsStorage() {
        if (shared_) thread_storage().in_use = false;
    }
    PartialsStorage(const PartialsStorage &) = delete;
    PartialsStorage &operator=(const PartialsStorage &) = delete;

    // Room for n floats, not initialized by this call (the kernel writes every partial).
    float *reserve(std::size_t n) {
        std::vector<float> &values = shared_ ? thread_storage().values : own_;
        if (values.size() < n) std::vector<float>(n).swap(values);
        return values.data();
    }

private:
    struct Storage {
        std::vector<float> values;
        bool in_use = false;
    };
    static Storage &thread_storage() {
        thread_local Storage storage;
        return storage;
    }
    bool shared_;
    std::vector<float> own_;
};

// dweight = cast(dscale), or cast(float32(dweight) + dscale), in dweight's dtype and layout: in
// host memory, or in device memory (contiguous, check_device_views) through the host.
void write_dweight(const BackwardPlan &g, CallContext &call, const std::vector<float> &dscale, void *dweight, bool accumulate);

}  // namespace magi2norm::detail
