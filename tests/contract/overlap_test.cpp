// Input and output in one piece of memory: views whose elements share no byte are accepted and
// computed right (the two halves of one tensor's rows, interleaved columns, BF16 elements in the
// gaps of an FP32 output), views that share one are refused with Error(overlap) and nothing
// written. Which is which is decided here by brute force, intersecting the views' byte sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <set>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"
#include "throws_error.hpp"

namespace contract {
namespace {

using magi2norm::ErrorCode;
using magi2norm::Grouping;

// Every byte address of every element of a view.
std::set<std::uintptr_t> bytes_of(const magi2norm::ConstTensorView &view) {
    std::set<std::uintptr_t> bytes;
    const ref::ViewReader reader(view);
    const auto base = reinterpret_cast<std::uintptr_t>(view.data);
    const auto size = static_cast<std::int64_t>(ref::element_size(view.dtype));
    ref::for_each_index(view.shape, [&](const ref::Shape &index) {
        for (std::int64_t b = 0; b < size; ++b) bytes.insert(base + static_cast<std::uintptr_t>(reader.offset(index) * size + b));
    });
    return bytes;
}

bool share_a_byte(const magi2norm::ConstTensorView &a, const magi2norm::ConstTensorView &b) {
    const std::set<std::uintptr_t> bytes_a = bytes_of(a);
    for (std::uintptr_t byte : bytes_of(b)) {
        if (bytes_a.count(byte) != 0) return true;
    }
    return false;
}

// Whether two indices of a view address the same element.
bool writes_an_element_twice(const magi2norm::ConstTensorView &view) {
    const ref::ViewReader reader(view);
    std::set<std::int64_t> offsets;
    bool twice = false;
    ref::for_each_index(view.shape, [&](const ref::Shape &index) { twice = !offsets.insert(reader.offset(index)).second || twice; });
    return twice;
}

magi2norm::NormConfig config_of(std::int64_t dim) {
    magi2norm::NormConfig config;
    config.dim = dim;
    return config;
}

// Runs x -> out of one norm of D = x.shape.back() on memory the views share and expects the
// reference's result of x's values before the call, and x's elements unchanged.
void expect_computed_in_place_of_gaps(const magi2norm::ConstTensorView &x, const magi2norm::TensorView &out, Rng &rng) {
    ASSERT_FALSE(share_a_byte(x, out)) << "the case's premise: no byte in common";
    const std::int64_t D = x.shape.back();
    const ref::HostTensor weight = random_weight(DType::bf16, {D}, rng);
    const ref::HostTensor x_before = ref::HostTensor::copy_of(x);
    const magi2norm::RMSNorm norm(config_of(D), weight.view());
    norm.forward(x, Grouping::none(), out, out.dtype);
    EXPECT_TRUE(ref::identical(ref::HostTensor::copy_of(x).view(), x_before.view())) << "the call changed its input";
    const ref::HostTensor y32 = ref::rms_norm({D, 1e-6f, 1, 1}, weight.view(), x_before.view());
    if (out.dtype == DType::f32) {
        EXPECT_TRUE(ref::gate1_close(out, y32.view()));
    } else {
        EXPECT_TRUE(ref::gate3_within_local_ulp(out, y32.cast(out.dtype).view()));
    }
}

TEST(Overlap, TheTwoHalvesOfEachRow) {
    Rng rng(3);
    for (const DType dtype : {DType::f32, DType::bf16}) {
        ref::HostTensor buf = random_input(dtype, {4, 32}, rng);
        expect_computed_in_place_of_gaps({buf.data(), dtype, {4, 16}, {32, 1}}, {buf.data_at(16), dtype, {4, 16}, {32, 1}}, rng);
        // And the other way round, the output before the input.
        expect_computed_in_place_of_gaps({buf.data_at(16), dtype, {4, 16}, {32, 1}}, {buf.data(), dtype, {4, 16}, {32, 1}}, rng);
    }
}

TEST(Overlap, InterleavedColumnsAndRows) {
    Rng rng(4);
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
        ref::HostTensor buf = random_input(dtype, {8, 32}, rng);
        expect_computed_in_place_of_gaps({buf.data(), dtype, {8, 16}, {32, 2}}, {buf.data_at(1), dtype, {8, 16}, {32, 2}}, rng);
        expect_computed_in_place_of_gaps({buf.data(), dtype, {4, 32}, {64, 1}}, {buf.data_at(32), dtype, {4, 32}, {64, 1}}, rng);
        // Reversed rows of one, every other row of the other.
        expect_computed_in_place_of_gaps({buf.data_at(6 * 32), dtype, {4, 32}, {-64, 1}}, {buf.data_at(32), dtype, {4, 32}, {64, 1}}, rng);
    }
}

// BF16 inputs in the upper halves of the FP32 output's 8-byte slots; two bytes lower they share
// bytes with the output's elements: the element widths count, not only where elements start.
TEST(Overlap, ElementsOfTwoWidths) {
    Rng rng(5);
    constexpr std::int64_t T = 4, D = 8;
    ref::Bytes memory(T * D * 8, 0);
    const ref::HostTensor values = random_input(DType::bf16, {T, D}, rng);
    for (std::int64_t i = 0; i < T * D; ++i) std::memcpy(memory.data() + 8 * i + 4, values.data_at(i), 2);
    const magi2norm::TensorView out(memory.data(), DType::f32, {T, D}, {2 * D, 2});
    expect_computed_in_place_of_gaps({memory.data() + 4, DType::bf16, {T, D}, {4 * D, 4}}, out, rng);

    const magi2norm::ConstTensorView inside(memory.data() + 2, DType::bf16, {T, D}, {4 * D, 4});
    ASSERT_TRUE(share_a_byte(inside, out));
    const ref::Bytes before = memory;
    const magi2norm::RMSNorm norm(config_of(D));
    EXPECT_TRUE(throws_error([&] { norm.forward(inside, Grouping::none(), out, DType::f32); }, ErrorCode::overlap,
                             {"input and output overlap"}));
    EXPECT_TRUE(memory == before) << "a refused call wrote";
}

// Random strided layouts of x and out in one buffer (strides -6..6 on both axes, offsets
// anywhere): each call is accepted and right, or refused for an output that writes an element
// twice (Error(stride)) or for a byte in common (Error(overlap)) with nothing written, exactly
// as brute force says.
TEST(Overlap, RandomLayoutsInOneBufferAgainstBruteForce) {
    Rng rng(6);
    constexpr std::int64_t kBytes = 1024;
    int computed = 0, overlapping = 0, self_aliased = 0, disjoint_in_range = 0;
    for (int trial = 0; trial < 1500; ++trial) {
        SCOPED_TRACE("trial " + std::to_string(trial));
        const DType in = rng.integer(0, 1) ? DType::f32 : DType::bf16, out_dtype = rng.integer(0, 1) ? DType::f32 : DType::bf16;
        const ref::Shape shape = {rng.integer(1, 4), rng.integer(1, 2) * 4};
        // Two trials in three draw strides that tend to interleave (inner 2 or 3, rows a multiple
        // of the inner span apart) and start the output near the input.
        const bool interleaving = trial % 3 != 0;
        const auto layout = [&](DType dtype, std::int64_t &first, const std::int64_t *near) {
            std::vector<std::int64_t> strides = {rng.integer(-6, 6), rng.integer(-3, 3)};
            if (interleaving) {
                strides[1] = rng.integer(2, 3) * (rng.integer(0, 1) ? 1 : -1);
                strides[0] = rng.integer(-2, 2) * std::llabs(strides[1]) * shape[1];
            }
            std::int64_t lo = 0, hi = 0;
            for (std::size_t i = 0; i < 2; ++i) (strides[i] < 0 ? lo : hi) += strides[i] * (shape[i] - 1);
            const auto size = static_cast<std::int64_t>(ref::element_size(dtype));
            const std::int64_t min_first = -lo * size, max_first = kBytes - (hi + 1) * size;
            first = rng.integer(min_first / size, max_first / size) * size;
            if (near != nullptr) {
                const std::int64_t candidate = *near + rng.integer(-3, 3) * 2;
                if (candidate >= min_first && candidate <= max_first && candidate % size == 0) first = candidate;
            }
            return strides;
        };
        // Every 2-byte half in [0.5, 2) as a BF16 value, so that FP32 and BF16 reads alike are tame.
        ref::HostTensor buffer(DType::bf16, {kBytes / 2});
        for (std::int64_t i = 0; i < buffer.size(); ++i) {
            const auto bits = static_cast<std::uint16_t>(0x3f00 | rng.integer(0, 255));
            std::memcpy(buffer.data_at(i), &bits, 2);
        }
        auto *bytes = static_cast<unsigned char *>(buffer.data());
        std::int64_t x_first = 0, out_first = 0;
        const std::vector<std::int64_t> x_strides = layout(in, x_first, nullptr);
        const std::vector<std::int64_t> out_strides = layout(out_dtype, out_first, interleaving ? &x_first : nullptr);
        const magi2norm::ConstTensorView x(bytes + x_first, in, shape, x_strides);
        const magi2norm::TensorView out(bytes + out_first, out_dtype, shape, out_strides);
        if (writes_an_element_twice(out)) {
            ++self_aliased;
            const ref::HostTensor before = buffer;
            EXPECT_TRUE(throws_error([&] { magi2norm::RMSNorm(config_of(shape[1])).forward(x, Grouping::none(), out, out_dtype); },
                                     ErrorCode::stride, {"two of its elements"}));
            EXPECT_TRUE(buffer.bytes() == before.bytes());
        } else if (share_a_byte(x, out)) {
            ++overlapping;
            const ref::HostTensor before = buffer;
            EXPECT_TRUE(throws_error([&] { magi2norm::RMSNorm(config_of(shape[1])).forward(x, Grouping::none(), out, out_dtype); },
                                     ErrorCode::overlap, {"input and output overlap"}));
            EXPECT_TRUE(buffer.bytes() == before.bytes());
        } else {
            ++computed;
            const std::set<std::uintptr_t> xb = bytes_of(x), ob = bytes_of(out);
            disjoint_in_range += *xb.begin() <= *ob.rbegin() && *ob.begin() <= *xb.rbegin();
            expect_computed_in_place_of_gaps(x, out, rng);
        }
    }
    std::printf("%d computed (%d of them within each other's byte range), %d overlapping, %d writing an element twice\n", computed,
                disjoint_in_range, overlapping, self_aliased);
    // Every outcome, and disjoint views whose byte ranges interleave (a range test refuses them).
    EXPECT_GT(computed, 60);
    EXPECT_GT(overlapping, 60);
    EXPECT_GT(self_aliased, 60);
    EXPECT_GT(disjoint_in_range, 60);
}

// Output strides that order their axes with interleaving yet never meet ([2, 3] with strides
// {4, 3}: elements 0 3 6 4 7 10) are written; {2, 1} meets itself (element 2 twice).
TEST(Overlap, OutputsAreRefusedOnlyForElementsTheyWriteTwice) {
    Rng rng(7);
    ref::HostTensor memory = random_input(DType::f32, {16}, rng);
    const ref::HostTensor x = random_input(DType::f32, {2, 3}, rng);
    const magi2norm::TensorView out(memory.data(), DType::f32, {2, 3}, {4, 3});
    ASSERT_FALSE(writes_an_element_twice(out));
    expect_computed_in_place_of_gaps(x.view(), out, rng);
    const magi2norm::TensorView twice(memory.data(), DType::f32, {2, 3}, {2, 1});
    ASSERT_TRUE(writes_an_element_twice(twice));
    EXPECT_TRUE(throws_error([&] { magi2norm::RMSNorm(config_of(3)).forward(x.view(), Grouping::none(), twice); }, ErrorCode::stride,
                             {"output [2, 3] with strides [2, 1] addresses the same memory from two of its elements"}));
}

// The exact test gives up after a bounded search and says so; this output (no two elements
// meet, which a longer search finds) takes more than the bound. plan() reads no data pointer.
TEST(Overlap, AnUndecidedLayoutIsRefusedSayingSo) {
    const ref::Shape shape = {1518, 408, 1796, 16};
    const magi2norm::RMSNorm norm(config_of(16));
    const magi2norm::TensorView out(nullptr, DType::f32, shape, {1270827206, 179816934, 1112801619, 1});
    EXPECT_TRUE(throws_error([&] { norm.plan({nullptr, DType::f32, shape}, Grouping::none(), out); }, ErrorCode::stride,
                             {"not decided within 65536 steps"}));
}

// The dispatcher's input and output may interleave too.
TEST(Overlap, DispatchBetweenInterleavedViews) {
    Rng rng(8);
    constexpr std::int64_t T = 5, D = 8;
    ref::HostTensor buf = random_input(DType::f32, {T, 2 * D}, rng);
    const std::vector<std::int32_t> mapping = {1, 0, 1, 0, 0};
    const magi2norm::ModalityDispatcher dispatcher(mapping.data(), T, 2);
    const magi2norm::ConstTensorView in(buf.data(), DType::f32, {T, D}, {2 * D, 2});
    const magi2norm::TensorView out(buf.data_at(1), DType::f32, {T, D}, {2 * D, 2});
    ASSERT_FALSE(share_a_byte(in, out));
    const ref::HostTensor in_before = ref::HostTensor::copy_of(in);
    dispatcher.dispatch(in, out);
    const ref::HostTensor result = ref::HostTensor::copy_of(out);
    const std::vector<std::int64_t> order = {1, 3, 4, 0, 2};  // stable: modality 0's tokens, then 1's
    for (std::int64_t i = 0; i < T; ++i) {
        for (std::int64_t d = 0; d < D; ++d) EXPECT_EQ(result.bits(i * D + d), in_before.bits(order[i] * D + d));
    }
    const magi2norm::TensorView shifted(buf.data_at(2), DType::f32, {T, D}, {2 * D, 2});
    EXPECT_TRUE(throws_error([&] { dispatcher.dispatch(in, shifted); }, ErrorCode::overlap, {"dispatch input and dispatch output overlap"}));
}

}  // namespace
}  // namespace contract
