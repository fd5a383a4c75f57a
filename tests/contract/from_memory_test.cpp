// Calls big enough to come from memory take their own code path on the CPU: from 4 MiB of input
// (`cpu_prefetch_bytes`) the schedule prefetches the next token's row while it writes a row, and
// the token tasks end with one shifted back over its neighbour. The contract suite's calls are
// far smaller, so the three gates are checked here on calls past that size, for every dtype
// pair, in the model's two layouts (rows and heads) and with unsorted modality ids, and the
// results are compared bit for bit with those of calls in cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"

namespace contract {
namespace {

constexpr std::int64_t kPrefetchBytes = 4 << 20;

struct FromMemoryParam {
    DType in, out;
};

std::string param_name(const testing::TestParamInfo<FromMemoryParam> &info) {
    return std::string(magi2norm::dtype_name(info.param.in)) + "_to_" + magi2norm::dtype_name(info.param.out);
}

class FromMemory : public testing::TestWithParam<FromMemoryParam> {
protected:
    // A test that changes the streaming policy leaves the default behind, even when it fails.
    void TearDown() override { magi2norm::set_streaming_policy(magi2norm::default_streaming_policy()); }
};

// Rows with a vector tail (D = 1031), the Q/K norm's heads, and 7 heads of 3072 (the sums come
// in chunks of 2 rows for 16-bit inputs, the last one shifted: schedules/cpu_schedule.cpp), each
// just past kPrefetchBytes of input; token counts that no task size divides, so the last task
// overlaps the one before it.
std::vector<ref::Shape> shapes_from_memory(DType in) {
    const std::int64_t in_bytes = in == DType::f32 ? 4 : 2;
    return {{kPrefetchBytes / (1031 * in_bytes) + 37, 1031},
            {kPrefetchBytes / (24 * 128 * in_bytes) + 11, 24, 128},
            {kPrefetchBytes / (7 * 3072 * in_bytes) + 3, 7, 3072}};
}

// The model's multi-modality case on `x`: three modalities, a random BF16 weight.
NormCase three_modalities(const ref::HostTensor &x, GroupingSpec grouping, DType out, Rng &rng) {
    const std::int64_t dim = x.shape().back();
    NormCase c;
    c.grouping = std::move(grouping);
    c.config.dim = dim;
    c.config.num_modality = 3;
    c.config.out_dtype = out;
    c.x = x.view();
    c.weight = random_weight(DType::bf16, {3 * dim}, rng);
    return c;
}

TEST_P(FromMemory, ThreeGates) {
    const FromMemoryParam &p = GetParam();
    Rng rng(1009 + 17 * static_cast<int>(p.in) + static_cast<int>(p.out));
    for (const ref::Shape &shape : shapes_from_memory(p.in)) {
        SCOPED_TRACE("x " + ref::format_shape(shape));
        const ref::HostTensor x = random_input(p.in, shape, rng);
        ASSERT_GE(x.bytes().size(), static_cast<std::size_t>(kPrefetchBytes));
        expect_contract(three_modalities(x, GroupingSpec::by_ids(random_ids(shape[0], 3, rng), 3), p.out, rng));
    }
}

// The paths compute the same values: a call from memory, with ordinary or streaming stores
// (the Q/K shape's output is aligned, the 1031-wide rows' is not), gives the same bits as its
// tokens cut into calls small enough to stay in cache.
TEST_P(FromMemory, SameBitsAsCallsInCache) {
    const FromMemoryParam &p = GetParam();
    const std::int64_t in_bytes = p.in == DType::f32 ? 4 : 2;
    Rng rng(2003 + 17 * static_cast<int>(p.in) + static_cast<int>(p.out));
    for (const ref::Shape &shape : shapes_from_memory(p.in)) {
        SCOPED_TRACE("x " + ref::format_shape(shape));
        const ref::HostTensor x = random_input(p.in, shape, rng);
        const std::vector<std::int32_t> ids = random_ids(shape[0], 3, rng);
        const NormCase c = three_modalities(x, GroupingSpec::by_ids(ids, 3), p.out, rng);
        magi2norm::set_streaming_policy({1, 0, 0});  // stream every output the variants can store aligned
        const ref::HostTensor streamed = run_library(c);
        magi2norm::set_streaming_policy({0, 0, 0});  // ordinary stores only
        const ref::HostTensor whole = run_library(c);
        EXPECT_TRUE(streamed.bytes() == whole.bytes()) << "streaming stores changed the output";

        const std::int64_t tokens = shape[0], chunk = tokens / 4 + 1;
        const std::int64_t token_elements = static_cast<std::int64_t>(x.bytes().size()) / (in_bytes * tokens);
        const std::size_t out_token_bytes = whole.bytes().size() / static_cast<std::size_t>(tokens);
        for (std::int64_t first = 0; first < tokens; first += chunk) {
            const std::int64_t count = std::min(chunk, tokens - first);
            ref::Shape part_shape = shape;
            part_shape[0] = count;
            NormCase part = c;
            part.x = magi2norm::ConstTensorView(x.data_at(first * token_elements), p.in, part_shape);
            part.grouping = GroupingSpec::by_ids({ids.begin() + first, ids.begin() + first + count}, 3);
            ASSERT_LT(count * token_elements * in_bytes, kPrefetchBytes);
            const ref::HostTensor y = run_library(part);
            EXPECT_EQ(0, std::memcmp(y.data(), whole.bytes().data() + first * out_token_bytes, y.bytes().size()))
                << "tokens " << first << ".." << first + count - 1;
        }
    }
}

std::vector<FromMemoryParam> all_pairs() {
    std::vector<FromMemoryParam> pairs;
    for (DType in : {DType::f32, DType::bf16, DType::f16})
        for (DType out : {DType::f32, DType::bf16, DType::f16}) pairs.push_back({in, out});
    return pairs;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FromMemory, testing::ValuesIn(all_pairs()), param_name);

}  // namespace
}  // namespace contract
