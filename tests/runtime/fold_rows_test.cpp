// How the runtime regroups the rows of a one-modality call into tokens (layout.cpp, fold_rows):
// what the kernel then sees, which the contract suites cannot observe (they check the values of
// the same layouts, tests/contract/strided_test.cpp).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "magi2norm/internal.hpp"

namespace {

using magi2norm::detail::fold_rows;
using magi2norm::detail::KernelLayout;
using Axes = std::array<std::int64_t, 4>;  // (d, h, a, t)

// The CPU schedule's default chunk (schedules/knobs.def, cpu_chunk_bytes), which the expected
// layouts below fill.
constexpr std::int64_t kChunkBytes = 16 * 1024;

KernelLayout layout_of(Axes extent, Axes x_stride, Axes out_stride) {
    KernelLayout l;
    l.extent = extent;
    l.x_stride = x_stride;
    l.out_stride = out_stride;
    return l;
}

KernelLayout dense(Axes extent) {
    const Axes strides = {1, extent[0], extent[0] * extent[1], extent[0] * extent[1] * extent[2]};
    return layout_of(extent, strides, strides);
}

void expect_axes(const KernelLayout &l, Axes extent, Axes x_stride, Axes out_stride) {
    EXPECT_EQ(l.extent, extent);
    EXPECT_EQ(l.x_stride, x_stride);
    EXPECT_EQ(l.out_stride, out_stride);
}

TEST(FoldRows, OneSequenceBecomesOneTokenPerRow) {
    KernelLayout l = dense({3072, 8192, 1, 1});  // x [1, 8192, 3072] bf16: one token before
    fold_rows(l, 2, false, kChunkBytes);
    constexpr std::int64_t sequence = 8192 * 3072;  // the unit axes keep their strides, never applied
    expect_axes(l, {3072, 1, 1, 8192}, {1, 3072, sequence, 3072}, {1, 3072, sequence, 3072});
}

TEST(FoldRows, BatchAndSequenceMerge) {
    KernelLayout l = dense({3072, 4096, 1, 2});  // [2, 4096, 3072]
    fold_rows(l, 2, false, kChunkBytes);
    EXPECT_EQ(l.extent, (Axes{3072, 1, 1, 8192}));
    EXPECT_EQ(l.x_stride[3], 3072);
}

TEST(FoldRows, HeadsWithinTheBudgetStayTogether) {
    KernelLayout l = dense({128, 24, 1, 4096});  // the Q/K norm: 6 KiB of BF16 a token
    fold_rows(l, 2, false, kChunkBytes);
    expect_axes(l, {128, 24, 1, 4096}, {1, 128, 3072, 3072}, {1, 128, 3072, 3072});
    KernelLayout wide = dense({128, 256, 1, 16});  // 64 KiB of BF16: still within
    fold_rows(wide, 2, false, kChunkBytes);
    EXPECT_EQ(wide.extent[1], 256);
    fold_rows(wide, 4, false, kChunkBytes);  // 128 KiB of FP32: past it, so one row a token, then 32 (16 KiB)
    expect_axes(wide, {128, 32, 1, 128}, {1, 128, 128 * 256, 128 * 32}, {1, 128, 128 * 256, 128 * 32});
}

TEST(FoldRows, ShortRowsGoToTokensOfSeveralRows) {
    KernelLayout rows = dense({128, 1, 1, 98304});  // [98304, 128] BF16: 256-byte rows
    fold_rows(rows, 2, false, kChunkBytes);
    expect_axes(rows, {128, 64, 1, 1536}, {1, 128, 128, 128 * 64}, {1, 128, 128, 128 * 64});
    KernelLayout odd = dense({128, 1, 1, 4099});  // a prime count of rows: no even split
    fold_rows(odd, 2, false, kChunkBytes);
    EXPECT_EQ(odd.extent, (Axes{128, 1, 1, 4099}));
    KernelLayout fewer = dense({128, 1, 1, 48});  // 48 rows: the largest divisor within 64 rows
    fold_rows(fewer, 2, false, kChunkBytes);
    EXPECT_EQ(fewer.extent, (Axes{128, 48, 1, 1}));
    KernelLayout wider = dense({768, 1, 1, 4096});  // rows past 512 bytes keep a token each
    fold_rows(wider, 2, false, kChunkBytes);
    EXPECT_EQ(wider.extent, (Axes{768, 1, 1, 4096}));
    KernelLayout patterns = dense({128, 1, 1, 4096});  // P > 1 (here a [1, D] pattern view): untouched
    fold_rows(patterns, 2, true, kChunkBytes);
    EXPECT_EQ(patterns.extent, (Axes{128, 1, 1, 4096}));
}

TEST(FoldRows, ReversedSequenceKeepsItsNegativeStride) {
    KernelLayout l = layout_of({768, 48, 1, 1}, {1, -768, 48 * 768, 48 * 768}, {1, 768, 48 * 768, 48 * 768});
    fold_rows(l, 2, false, kChunkBytes);
    expect_axes(l, {768, 1, 1, 48}, {1, -768, 48 * 768, -768}, {1, 768, 48 * 768, 768});
}

TEST(FoldRows, StridesThatDoNotChainSwapInsteadOfMerging) {
    // Batches padded by one row in the input, then in the output only: 3 tokens of 48 rows (72
    // KiB of BF16) become 48 tokens of 3 rows, a batch apart.
    KernelLayout padded_in = layout_of({768, 48, 1, 3}, {1, 768, 49 * 768, 49 * 768}, {1, 768, 48 * 768, 48 * 768});
    fold_rows(padded_in, 2, false, kChunkBytes);
    expect_axes(padded_in, {768, 3, 1, 48}, {1, 49 * 768, 49 * 768, 768}, {1, 48 * 768, 48 * 768, 768});
    KernelLayout padded_out = layout_of({768, 48, 1, 3}, {1, 768, 48 * 768, 48 * 768}, {1, 768, 49 * 768, 49 * 768});
    fold_rows(padded_out, 2, false, kChunkBytes);
    expect_axes(padded_out, {768, 3, 1, 48}, {1, 48 * 768, 48 * 768, 768}, {1, 49 * 768, 49 * 768, 768});
    // A middle axis that does not chain with the tokens keeps every axis where it is.
    KernelLayout rank4 = layout_of({768, 48, 2, 3}, {1, 768, 48 * 768, 97 * 768}, {1, 768, 48 * 768, 96 * 768});
    const KernelLayout before = rank4;
    fold_rows(rank4, 2, false, kChunkBytes);
    expect_axes(rank4, before.extent, before.x_stride, before.out_stride);
}

TEST(FoldRows, HeadsMajorMemoryMakesTheLongerAxisTheTokens) {
    // [24, 4096, 128] read from [4096, 24, 128] memory: 24 tokens of 1 MiB, then 4096 of 24 heads.
    KernelLayout l = layout_of({128, 4096, 1, 24}, {1, 3072, 3072 * 4096, 128}, {1, 3072, 3072 * 4096, 128});
    fold_rows(l, 2, false, kChunkBytes);
    expect_axes(l, {128, 24, 1, 4096}, {1, 128, 3072 * 4096, 3072}, {1, 128, 3072 * 4096, 3072});
    KernelLayout within = layout_of({128, 256, 1, 24}, {1, 3072, 3072 * 256, 128}, {1, 3072, 3072 * 256, 128});
    fold_rows(within, 2, false, kChunkBytes);  // 64 KiB tokens stay as they are
    EXPECT_EQ(within.extent, (Axes{128, 256, 1, 24}));
}

TEST(FoldRows, MiddleAxisMergesAndPatternsStay) {
    KernelLayout rank4 = dense({768, 4, 3, 2});  // [2, 3, 4, 768] under a [4, 768] scale
    fold_rows(rank4, 4, true, kChunkBytes);
    EXPECT_EQ(rank4.extent, (Axes{768, 4, 1, 6}));
    EXPECT_EQ(rank4.x_stride[3], 4 * 768);
    KernelLayout many = dense({768, 4096, 1, 1});
    fold_rows(many, 4, true, kChunkBytes);  // a pattern axis never folds, however long
    EXPECT_EQ(many.extent, (Axes{768, 4096, 1, 1}));
}

TEST(FoldRows, ExtentsStayWithinInt32) {
    KernelLayout l = dense({1, 65536, 1, 65536});  // 2^32 rows of one element
    fold_rows(l, 4, false, kChunkBytes);
    EXPECT_EQ(l.extent, (Axes{1, 65536, 1, 65536}));
}

}  // namespace
