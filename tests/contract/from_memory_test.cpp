// Calls big enough to come from memory take their own code path on the CPU: from 4 MiB of input
// (`cpu_prefetch_bytes`) the schedule prefetches the next token's row while it writes a row, and
// the token tasks end with one shifted back over its neighbour. The contract suite's calls are
// far smaller, so the three gates are checked here on calls past that size, for every dtype
// pair, in the model's two layouts (rows and heads) and with unsorted modality ids.
#include <gtest/gtest.h>

#include <string>

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

class FromMemory : public testing::TestWithParam<FromMemoryParam> {};

TEST_P(FromMemory, ThreeGates) {
    const FromMemoryParam &p = GetParam();
    const std::int64_t in_bytes = p.in == DType::f32 ? 4 : 2;
    // Rows with a vector tail (D = 1031) and the Q/K norm's heads; token counts that no task
    // size divides, so the last task overlaps the one before it.
    const ref::Shape row_shape{kPrefetchBytes / (1031 * in_bytes) + 37, 1031};
    const ref::Shape head_shape{kPrefetchBytes / (24 * 128 * in_bytes) + 11, 24, 128};
    Rng rng(1009 + 17 * static_cast<int>(p.in) + static_cast<int>(p.out));
    for (const ref::Shape &shape : {row_shape, head_shape}) {
        SCOPED_TRACE("x " + ref::format_shape(shape));
        const ref::HostTensor x = random_input(p.in, shape, rng);
        ASSERT_GE(x.bytes().size(), static_cast<std::size_t>(kPrefetchBytes));
        NormCase c;
        c.grouping = GroupingSpec::by_ids(random_ids(shape[0], 3, rng), 3);
        c.config.dim = shape.back();
        c.config.num_modality = 3;
        c.config.out_dtype = p.out;
        c.x = x.view();
        c.weight = random_weight(DType::bf16, {3 * shape.back()}, rng);
        expect_contract(c);
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
