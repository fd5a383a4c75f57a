// One call of the norm, described once and run both through the library and the reference, and
// the three gates of SPEC.md applied to it.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"
#include "reference/reference.hpp"

namespace contract {

using magi2norm::DType;

// How the tokens (axis 0) are assigned to modalities.
struct GroupingSpec {
    enum class Kind { none, sizes, ids, dispatcher };
    Kind kind = Kind::none;
    std::int64_t num_modality = 1;
    std::vector<std::int64_t> sizes;  // Kind::sizes
    std::vector<std::int32_t> ids;    // Kind::ids: per token; Kind::dispatcher: the mapping it is built from

    static GroupingSpec none() { return {}; }
    static GroupingSpec by_sizes(std::vector<std::int64_t> sizes);
    static GroupingSpec by_ids(std::vector<std::int32_t> ids, std::int64_t num_modality);
    // The input is in the dispatched (modality-sorted) order of a dispatcher built from `mapping`.
    static GroupingSpec by_dispatcher(std::vector<std::int32_t> mapping, std::int64_t num_modality);

    // The library's Grouping; ids are borrowed from this spec, which must outlive the call.
    magi2norm::Grouping library() const;
    // The modality of each token for the reference, derived here without the library.
    std::vector<std::int32_t> token_modality() const;
    std::string describe() const;
};

struct NormCase {
    magi2norm::NormConfig config;           // its out_dtype may be set
    ref::HostTensor weight;
    magi2norm::ConstTensorView x;           // any strides; the memory belongs to the test
    GroupingSpec grouping;
    std::optional<DType> out_override;      // the per-call out_dtype

    // SPEC.md's resolution: the per-call override, else config.out_dtype, else the input dtype.
    DType out_dtype() const;
    std::string describe() const;
};

ref::Params params_of(const magi2norm::NormConfig &config);

// The library's result in a fresh contiguous tensor of the reference's output shape.
ref::HostTensor run_library(const NormCase &c, std::optional<DType> out_override);
ref::HostTensor run_library(const NormCase &c);
// The reference's pre-cast FP32 result.
ref::HostTensor run_reference(const NormCase &c);

// Whether magi2norm::last_variant() names a variant of `backend` for (in, out): the backend's own
// ("cpu", "opencl", "cuda" or "cuda<cc>"); on the CPU the paired-word form ("cpu_paired") when
// `paired`, with streaming stores ("cpu_streaming", "cpu_paired_streaming") when `streaming`;
// a tuning class's variant of that kind too ("cpu_t1_paired": a tuned build).
testing::AssertionResult ran_variant(magi2norm::Backend backend, DType in, DType out, bool streaming, bool paired = false);

// Whether BF16 outputs of CPU calls take the AVX-512 BF16 variants in this process: the CPU runs
// them, the build has them, and MAGI2NORM_TEST_CPU (cpu_baseline.cpp) did not turn them off. They
// then serve the calls of the element and paired-word families to BF16 (cpu_family_run), which
// the run with MAGI2NORM_TEST_CPU=no_avx512_bf16 checks instead.
bool native_bf16_runs();
std::string cpu_family_run(DType out, const std::string &family);

// A BF16 -> BF16 call of `norm` on the dense values of `x` (shape x.shape()) with x and the
// output both one element (two bytes) past a word boundary, where the paired-word form does
// not apply: the element form's result for the same values. The output has `out_shape` and
// `out_strides` (empty: dense); returns the `span` elements it spans, its gaps filled with 0xAB
// bytes.
ref::HostTensor forward_off_word_boundary(const magi2norm::RMSNorm &norm, const ref::HostTensor &x,
                                          const magi2norm::Grouping &grouping, const ref::Shape &out_shape,
                                          const std::vector<std::int64_t> &out_strides, std::int64_t span);

// Runs the case (with its out dtype, and again with an FP32 override) and checks all three gates
// explicitly, and that neither input nor weight changed.
void expect_contract(const NormCase &c);

}  // namespace contract
