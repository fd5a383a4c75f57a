// The exact overlap test (runtime/src/views/overlap.cpp) against brute force: random small strided
// views (negative, zero and interleaving strides, elements of 2 and 4 bytes, any byte offset),
// their byte sets intersected element by element; and the bound on the work, reached.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "magi2norm/internal.hpp"

namespace magi2norm::detail {
namespace {

struct View {
    CheckedView checked;
    std::uint64_t base = 0;  // the byte of element 0
};

// Every byte offset of every element of `v`, and whether two of its elements start at one byte.
std::set<std::uint64_t> bytes_of(const View &v, bool *self_overlap = nullptr) {
    std::set<std::uint64_t> bytes, starts;
    const auto elem = static_cast<std::int64_t>(dtype_size(v.checked.dtype));
    const std::size_t rank = v.checked.shape.size();
    std::vector<std::int64_t> index(rank, 0);
    for (std::int64_t n = 0; n < v.checked.count; ++n) {
        std::int64_t offset = 0;
        for (std::size_t i = 0; i < rank; ++i) offset += index[i] * v.checked.strides[i];
        const std::uint64_t start = v.base + static_cast<std::uint64_t>(offset * elem);
        if (!starts.insert(start).second && self_overlap) *self_overlap = true;
        for (std::int64_t b = 0; b < elem; ++b) bytes.insert(start + static_cast<std::uint64_t>(b));
        for (std::size_t i = rank; i-- > 0;) {
            if (++index[i] < v.checked.shape[i]) break;
            index[i] = 0;
        }
    }
    return bytes;
}

View random_view(std::mt19937_64 &rng) {
    std::uniform_int_distribution<int> rank(1, 3), extent(1, 4), stride(-7, 7), dtype(0, 1);
    std::vector<std::int64_t> shape, strides;
    for (int i = rank(rng); i > 0; --i) {
        shape.push_back(extent(rng));
        strides.push_back(stride(rng));
    }
    View v;
    check_geometry(v.checked, dtype(rng) ? DType::f32 : DType::bf16, shape, strides, "view");
    // Element 0 far enough in that negative strides stay above 0.
    v.base = 200 + std::uniform_int_distribution<std::uint64_t>(0, 40)(rng);
    return v;
}

Region region_of(const View &v) {
    return {nullptr, v.base + static_cast<std::uint64_t>(v.checked.lo_bytes), v.base + static_cast<std::uint64_t>(v.checked.hi_bytes),
            static_cast<std::int64_t>(dtype_size(v.checked.dtype)), &v.checked.shape, &v.checked.strides};
}

TEST(Overlap, TwoViewsShareMemoryExactlyWhenTheirBytesIntersect) {
    std::mt19937_64 rng(17);
    int shared = 0, disjoint_within_range = 0;
    for (int trial = 0; trial < 20000; ++trial) {
        const View a = random_view(rng), b = random_view(rng);
        const std::set<std::uint64_t> bytes_a = bytes_of(a), bytes_b = bytes_of(b);
        bool intersect = false;
        for (std::uint64_t byte : bytes_a) intersect = intersect || bytes_b.count(byte) != 0;
        const Region ra = region_of(a), rb = region_of(b);
        const Sharing got = shares_memory(ra, rb);
        ASSERT_EQ(got, intersect ? Sharing::shared : Sharing::none) << "trial " << trial;
        ASSERT_EQ(shares_memory(rb, ra), got) << "trial " << trial;
        shared += intersect;
        disjoint_within_range += !intersect && ra.lo < rb.hi && rb.lo < ra.hi;
    }
    // Both answers, and many disjoint pairs whose byte ranges intersect (which a range test refuses).
    EXPECT_GT(shared, 2000);
    EXPECT_GT(disjoint_within_range, 2000);
}

TEST(Overlap, AViewOverlapsItselfExactlyWhenTwoElementsStartAtOneByte) {
    std::mt19937_64 rng(23);
    int aliased = 0, distinct = 0;
    for (int trial = 0; trial < 20000; ++trial) {
        const View v = random_view(rng);
        bool self = false;
        bytes_of(v, &self);
        ASSERT_EQ(overlaps_itself(v.checked), self ? Sharing::shared : Sharing::none) << "trial " << trial;
        aliased += self;
        distinct += !self && v.checked.count > 1;
    }
    EXPECT_GT(aliased, 2000);
    EXPECT_GT(distinct, 2000);
}

// Strides whose values leave every choice open on the top levels: 2 * 3 * 5 * 7 ... make the
// gcd of the rest 1 and the remainder window wide, so the search has to try many values.
TEST(Overlap, TheBoundOnTheWorkIsReportedAsUndecided) {
    CheckedView a, b;
    check_geometry(a, DType::f32, {30, 30, 30}, {1009, 1013, 1019}, "a");
    check_geometry(b, DType::f32, {30, 30}, {1021, 1031}, "b");
    Region ra{nullptr, 0, static_cast<std::uint64_t>(a.hi_bytes), 4, &a.shape, &a.strides};
    Region rb{nullptr, 6, 6 + static_cast<std::uint64_t>(b.hi_bytes), 4, &b.shape, &b.strides};
    EXPECT_EQ(shares_memory(ra, rb, 3), Sharing::undecided);
    const Sharing decided = shares_memory(ra, rb, std::int64_t{1} << 40);
    EXPECT_NE(decided, Sharing::undecided);
    // Within a bound that decides it, the same answer as brute force.
    const std::set<std::uint64_t> bytes_a = bytes_of({a, 0}), bytes_b = bytes_of({b, 6});
    bool intersect = false;
    for (std::uint64_t byte : bytes_b) intersect = intersect || bytes_a.count(byte) != 0;
    EXPECT_EQ(decided, intersect ? Sharing::shared : Sharing::none);
    EXPECT_EQ(overlaps_itself(a, 0), Sharing::undecided);
}

}  // namespace
}  // namespace magi2norm::detail
