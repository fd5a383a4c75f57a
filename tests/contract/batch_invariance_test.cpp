// Batch invariance: a row's output and dx are the same bits whatever else the call holds (how
// many rows, where the row sits, how many threads run it, one call or several), and the weight
// gradient the same for any thread count. The sums' order is the algorithm's, not a schedule's
// (docs/design.md, Numerics), so nothing about the call can move a bit.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "magi2norm/magi2norm.hpp"
#include "random_values.hpp"

namespace contract {
namespace {

using magi2norm::ConstTensorView;
using magi2norm::DType;
using magi2norm::Grouping;
using magi2norm::TensorView;

constexpr std::int64_t kDim = 3072;  // the pre-norm's width

magi2norm::RMSNorm pre_norm(Rng &rng) {
    ref::HostTensor weight = random_weight(ref::DType::bf16, {3, kDim}, rng);
    return magi2norm::RMSNorm({kDim, 1e-6f, 3, 1, DType::bf16}, ConstTensorView(weight.data(), DType::bf16, {3 * kDim}));
}

// y rows [first, first + count) of a call on those rows alone, with `threads` threads.
std::vector<std::uint16_t> forward_rows(const magi2norm::RMSNorm &norm, const std::vector<std::uint16_t> &x,
                                        const std::vector<std::int32_t> &ids, std::int64_t first, std::int64_t count, int threads) {
    std::vector<std::uint16_t> y(static_cast<std::size_t>(count * kDim));
    magi2norm::CallOptions options;
    options.num_threads = threads;
    norm.forward(ConstTensorView(x.data() + first * kDim, DType::bf16, {count, kDim}), Grouping::ids(ids.data() + first, count),
                 TensorView(y.data(), DType::bf16, {count, kDim}), options);
    return y;
}

std::vector<std::uint16_t> random_bf16(std::int64_t count, Rng &rng) {
    ref::HostTensor t = random_input(ref::DType::bf16, {count}, rng);
    std::vector<std::uint16_t> v(static_cast<std::size_t>(count));
    std::memcpy(v.data(), t.data(), v.size() * 2);
    return v;
}

TEST(BatchInvariance, RowsOfA60000TokenCallEqualTheSameRowsAloneAtOtherOffsetsAndThreadCounts) {
    Rng rng(59);
    const magi2norm::RMSNorm norm = pre_norm(rng);
    constexpr std::int64_t tokens = 60000;
    const std::vector<std::uint16_t> x = random_bf16(tokens * kDim, rng);
    const std::vector<std::int32_t> ids = random_ids(tokens, 3, rng);
    const std::vector<std::uint16_t> all = forward_rows(norm, x, ids, 0, tokens, 2);
    std::vector<std::int64_t> rows = {0, 1, 4095, 4096, 30000, tokens - 1};
    for (int i = 0; i < 16; ++i) rows.push_back(rng.integer(0, tokens - 1));
    for (std::int64_t r : rows) {
        const std::int64_t before = std::min<std::int64_t>(r, 37);
        const std::int64_t window = std::min<std::int64_t>(tokens - r + before, 100);
        for (int threads : {1, 2, 3, 4}) {
            const auto alone = forward_rows(norm, x, ids, r, 1, threads);
            const auto inside = forward_rows(norm, x, ids, r - before, window, threads);
            ASSERT_EQ(0, std::memcmp(alone.data(), all.data() + r * kDim, kDim * 2)) << "row " << r << " alone, " << threads << " threads";
            ASSERT_EQ(0, std::memcmp(inside.data() + before * kDim, all.data() + r * kDim, kDim * 2))
                << "row " << r << " at offset " << before << " of " << window << ", " << threads << " threads";
        }
    }
}

struct Gradients {
    std::vector<std::uint16_t> dx;
    std::vector<float> dweight;
};

Gradients backward_rows(const magi2norm::RMSNorm &norm, const std::vector<std::uint16_t> &x, const std::vector<std::uint16_t> &dy,
                        const std::vector<std::int32_t> &ids, std::int64_t count, int threads) {
    Gradients g{std::vector<std::uint16_t>(static_cast<std::size_t>(count * kDim)), std::vector<float>(3 * kDim)};
    magi2norm::BackwardOptions options;
    options.num_threads = threads;
    norm.backward(ConstTensorView(x.data(), DType::bf16, {count, kDim}), ConstTensorView(dy.data(), DType::bf16, {count, kDim}),
                  Grouping::ids(ids.data(), count), TensorView(g.dx.data(), DType::bf16, {count, kDim}),
                  TensorView(g.dweight.data(), DType::f32, {3 * kDim}), options);
    return g;
}

TEST(BatchInvariance, BackwardDxRowsAndTheWeightGradientAtEveryThreadCount) {
    Rng rng(61);
    const magi2norm::RMSNorm norm = pre_norm(rng);
    constexpr std::int64_t tokens = 4096;
    const std::vector<std::uint16_t> x = random_bf16(tokens * kDim, rng), dy = random_bf16(tokens * kDim, rng);
    const std::vector<std::int32_t> ids = random_ids(tokens, 3, rng);
    const Gradients one = backward_rows(norm, x, dy, ids, tokens, 1);
    for (int threads : {2, 3, 4}) {
        const Gradients g = backward_rows(norm, x, dy, ids, tokens, threads);
        EXPECT_EQ(0, std::memcmp(g.dx.data(), one.dx.data(), one.dx.size() * 2)) << threads << " threads";
        EXPECT_EQ(0, std::memcmp(g.dweight.data(), one.dweight.data(), one.dweight.size() * 4)) << threads << " threads";
    }
    // dx of the first 100 tokens in a call of their own: the same rows.
    const Gradients head = backward_rows(norm, x, dy, ids, 100, 2);
    EXPECT_EQ(0, std::memcmp(head.dx.data(), one.dx.data(), head.dx.size() * 2));
}

}  // namespace
}  // namespace contract
