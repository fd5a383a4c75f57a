// One input past 2^31 bytes (the model's mHC norm on a long clip: bf16 [90000, 12288], 2.2 GB),
// normalized to f32 (4.4 GB, past 2^32 bytes) and to bf16, with three modalities by group sizes.
// Sampled rows, in particular those whose byte offsets are beyond 2^31 and 2^32, are checked
// against the reference with the three gates, and the call is still split into many parallel
// tasks (a 32-bit byte count once made it one). Labelled `large`: it needs ~9 GB of memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"

namespace contract {
namespace {

constexpr std::int64_t T = 90000, D = 12288;

// BF16 bit patterns straight from a hash of the element index (an RNG per element would take
// longer than the norm): a random sign and mantissa, an exponent that follows the row so rows
// span 2^-20 .. 2^20, spread over 4 binades within a row.
void fill_input(ref::HostTensor &x) {
    auto *bits = static_cast<std::uint16_t *>(x.data());
    for (std::int64_t row = 0; row < T; ++row) {
        const std::uint32_t row_exponent = 127 - 20 + static_cast<std::uint32_t>(row % 41);
        for (std::int64_t d = 0; d < D; ++d) {
            std::uint64_t h = static_cast<std::uint64_t>(row * D + d) * 0x9e3779b97f4a7c15ull;
            h ^= h >> 29;
            const auto exponent = row_exponent - static_cast<std::uint32_t>((h >> 8) & 3u);
            bits[row * D + d] = static_cast<std::uint16_t>(((h >> 16) & 0x8000u) | (exponent << 7) | (h & 0x7fu));
        }
    }
}

// A host parallel loop that runs the tasks in order and records the largest loop.
struct LoopCounts {
    int largest = 0;
};
void counting_loop(void *context, int count, void (*task)(void *, int), void *task_context) {
    auto *counts = static_cast<LoopCounts *>(context);
    counts->largest = std::max(counts->largest, count);
    for (int i = 0; i < count; ++i) task(task_context, i);
}

// A [1, D] view of row `row` of a contiguous [T, D] tensor.
ref::ConstTensorView row_view(const ref::HostTensor &tensor, std::int64_t row) {
    return {tensor.data_at(row * D), tensor.dtype(), {1, D}};
}

TEST(Large, InputBeyondTwoGiB) {
    ref::HostTensor x(DType::bf16, {T, D});
    fill_input(x);
    ASSERT_GT(x.bytes().size(), std::size_t{1} << 31);

    Rng rng(37);
    const std::vector<std::int64_t> sizes = {30000, 0, 60000};
    NormCase c;
    c.x = x.view();
    c.config.dim = D;
    c.config.num_modality = 3;
    c.weight = random_weight(DType::bf16, {3 * D}, rng);
    c.grouping = GroupingSpec::by_sizes(sizes);
    const std::vector<std::int32_t> modality = c.grouping.token_modality();

    ref::HostTensor y_f32 = run_library(c, DType::f32);
    LoopCounts counts;
    magi2norm::set_parallel_for(counting_loop, &counts);
    ref::HostTensor y_bf16 = run_library(c, DType::bf16);
    magi2norm::set_parallel_for(nullptr);
    // 2.2 GB of input in tasks of 1 MiB (`cpu_memory_task_bytes`): about two thousand tasks.
    EXPECT_GT(counts.largest, 1000);

    // Input rows past 2^31 bytes start at 87382; f32 output rows past 2^31 at 43691, past 2^32 at 87382.
    const std::vector<std::int64_t> rows = {0,     1,     29999, 30000, 43690, 43691, 65536,
                                            87381, 87382, 87383, 89000, T - 2, T - 1};
    const ref::Params params{D, c.config.eps, 3, 1};
    for (std::int64_t row : rows) {
        SCOPED_TRACE("row " + std::to_string(row) + " (modality " + std::to_string(modality[row]) + ")");
        const ref::HostTensor expected = ref::rms_norm(params, c.weight.view(), row_view(x, row), {modality[row]});
        EXPECT_TRUE(ref::gate1_close(row_view(y_f32, row), expected.view()));
        EXPECT_TRUE(ref::gate2_cast_of_own_f32(row_view(y_bf16, row), row_view(y_f32, row)));
        EXPECT_TRUE(ref::gate3_within_local_ulp(row_view(y_bf16, row), expected.cast(DType::bf16).view()));
    }
}

}  // namespace
}  // namespace contract
