// The data of one case, shared by every implementation measured on it: random inputs (never
// zero) in a rotation of input/output buffer pairs, a BF16 weight, the grouping, and a check
// that an implementation's output is the norm of the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "aligned_buffer.hpp"
#include "cases.hpp"

namespace magi2norm::bench {

// Size of the largest CPU cache in bytes (sysfs; 32 MiB when it cannot be read): a case's
// buffers rotate through more than it, so that cases of large T stream from memory.
std::size_t last_level_cache_bytes();

// The model's eps (SPEC.md default).
constexpr float kEps = 1e-6f;

class Workspace {
public:
    // The workspace of `c`, made on first use. Only one lives at a time: asking for another case
    // frees this one first. Benchmarks are registered case by case, so every implementation of a
    // case sees the same data and each case's data is made once.
    static Workspace &of(const Case &c);

    explicit Workspace(Case c);
    Workspace(const Workspace &) = delete;
    Workspace &operator=(const Workspace &) = delete;

    const Case &spec() const { return case_; }
    // Input/output pairs rotated through, one per call: one pair when it fits comfortably in
    // the last-level cache (T = 1 or 16 reads what its producer just wrote); otherwise enough
    // pairs that at least 4x the last-level cache is touched before a pair comes back, so every
    // call streams from memory as in the model at large T.
    std::size_t pairs() const { return inputs_.size(); }
    bool cache_resident() const { return cache_resident_; }
    const void *x(std::size_t pair) const { return inputs_[pair].data(); }
    void *out(std::size_t pair) const { return outputs_[pair].data(); }

    // BF16 bits, M*D, modality-major (the model's parameters are BF16).
    const std::vector<std::uint16_t> &weight() const { return weight_; }
    // float32(bf16(w + 1)), M*D: SPEC.md's scale, what kernels that take a prepared scale read.
    const std::vector<float> &scale() const { return scale_; }
    const std::vector<std::int64_t> &group_sizes() const { return group_sizes_; }
    // Per-token modality ids in shuffled token order (grouping by ids; empty otherwise).
    const std::vector<std::int32_t> &token_ids() const { return token_ids_; }

    // Empty when `out` (contiguous, the case's output dtype, computed from pair 0's input) holds
    // the norm within the output dtype's precision on a few sampled tokens; else what differs.
    std::string check(const void *out) const;

private:
    std::int64_t modality_of(std::int64_t token) const;

    Case case_;
    std::vector<measure::AlignedBuffer> inputs_, outputs_;
    bool cache_resident_ = false;
    std::vector<std::uint16_t> weight_;
    std::vector<float> scale_;
    std::vector<std::int64_t> group_sizes_;
    std::vector<std::int32_t> token_ids_;
};

}  // namespace magi2norm::bench
