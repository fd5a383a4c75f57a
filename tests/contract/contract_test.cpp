// The numerical contract over the API's space: every (input, output) dtype pair and weight dtype,
// dims from 1 to the mHC width, every shape rule of the API, every kind of grouping and every way
// to choose the output dtype. Each test is one (dtypes, D); inside it runs its layouts, three seeds
// and each grouping the layout allows, checking the three gates of SPEC.md on each call (the
// trace of a failure names the layout, the seed and the whole call).
//
// Shape semantics pinned here (the API's reading of SPEC.md):
//   P == 1: the scale is a [D] row, the output shape is the input shape (rank 1 included);
//   P > 1: the scale is [P, D] and broadcasts with x under NumPy's rules:
//     [T, P, D] -> [T, P, D];  [T, 1, D] -> [T, P, D] (singleton head);  [D] -> [P, D];
//     [T, D] with T == P or 1 -> [P, D] (axis 0 is then the pattern axis, so no grouping);
//     [T, A, H, D] with H in {1, P} -> [T, A, P, D].
//   Modality grouping is along axis 0; Grouping::from(dispatcher) means x is in dispatched order.
//   Output dtype: the per-call override, else config.out_dtype, else the input dtype.
#include <gtest/gtest.h>

#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"

namespace contract {
namespace {

enum class Layout { rows, heads, patterns, singleton_head, vector, rank4, pattern_axis0 };

const char *layout_name(Layout layout) {
    switch (layout) {
    case Layout::rows: return "rows";                      // [T, D], P = 1
    case Layout::heads: return "heads";                    // [T, H, D], P = 1
    case Layout::patterns: return "patterns";              // [T, P, D]
    case Layout::singleton_head: return "singleton_head";  // [T, 1, D], P > 1
    case Layout::vector: return "vector";                  // [D], P = 1 or P > 1
    case Layout::rank4: return "rank4";                    // [T, A, H, D], H in {1, P}
    case Layout::pattern_axis0: return "pattern_axis0";    // [T, D], T in {1, P}, P > 1
    }
    return "?";
}

const std::vector<DType> kDTypes = {DType::f32, DType::bf16, DType::f16};
const std::vector<Layout> kAllLayouts = {Layout::rows,   Layout::heads, Layout::patterns,     Layout::singleton_head,
                                         Layout::vector, Layout::rank4, Layout::pattern_axis0};
const std::vector<Layout> kModelLayouts = {Layout::rows, Layout::heads, Layout::patterns, Layout::singleton_head};

// One test: an (input, output) dtype pair at one D. For small D it runs every layout with one
// weight dtype (so the tests span the full cross product); for D >= 768, where a call costs
// more, the layouts of the model with the weight dtype rotating among them.
struct ContractParam {
    DType in, out;
    std::int64_t dim;
    std::optional<DType> weight;  // unset: the rotation of wide D
};

struct LayoutRun {
    Layout layout;
    DType weight;
};

std::vector<LayoutRun> runs_of(const ContractParam &p) {
    std::vector<LayoutRun> runs;
    if (p.weight) {
        for (Layout layout : kAllLayouts) runs.push_back({layout, *p.weight});
    } else {
        for (std::size_t i = 0; i < kModelLayouts.size(); ++i) runs.push_back({kModelLayouts[i], kDTypes[i % 3]});
    }
    return runs;
}

std::string name_of(const ContractParam &p) {
    std::string name = std::string(magi2norm::dtype_name(p.in)) + "_to_" + magi2norm::dtype_name(p.out);
    if (p.weight) name += std::string("_w") + magi2norm::dtype_name(*p.weight);
    return name + "_D" + std::to_string(p.dim);
}

std::string param_name(const testing::TestParamInfo<ContractParam> &info) { return name_of(info.param); }
// gtest prints the parameter of a failing test with this rather than as raw bytes.
void PrintTo(const ContractParam &p, std::ostream *os) { *os << name_of(p); }

std::vector<ContractParam> all_params() {
    std::vector<ContractParam> params;
    for (std::int64_t dim : {1, 7, 64, 128}) {
        for (DType in : kDTypes)
            for (DType out : kDTypes)
                for (DType weight : kDTypes) params.push_back({in, out, dim, weight});
    }
    // 100: a whole block of the sum of squares' partials (64 at the CPU default) and a partial one.
    for (std::int64_t dim : {100, 768, 1536, 3072, 12288}) {
        for (DType in : kDTypes)
            for (DType out : kDTypes) params.push_back({in, out, dim, std::nullopt});
    }
    return params;
}

std::vector<GroupingSpec::Kind> groupings_for(Layout layout) {
    using Kind = GroupingSpec::Kind;
    // Without a token axis (rank 1) or with axis 0 being the pattern axis, M must be 1.
    if (layout == Layout::vector || layout == Layout::pattern_axis0) return {Kind::none};
    return {Kind::none, Kind::sizes, Kind::ids, Kind::dispatcher};
}

struct Shapes {
    ref::Shape x;
    std::int64_t num_patterns;
};

Shapes shapes_for(std::int64_t D, Layout layout, int seed, Rng &rng) {
    // Wide rows cost more per token: fewer tokens and heads keep the suite quick on 2 cores.
    const bool wide = D >= 768;
    const std::int64_t T = wide ? rng.integer(2, 5) : rng.integer(3, 37);
    switch (layout) {
    case Layout::rows: return {{T, D}, 1};
    case Layout::heads: return {{T, wide ? rng.integer(2, 3) : rng.integer(2, 5), D}, 1};
    case Layout::patterns: {
        const std::int64_t P = rng.integer(2, 4);
        return {{T, P, D}, P};
    }
    case Layout::singleton_head: return {{T, 1, D}, rng.integer(2, 4)};
    case Layout::vector: return {{D}, seed == 2 ? rng.integer(2, 4) : 1};
    case Layout::rank4: {
        const std::int64_t P = rng.integer(2, 3);
        return {{T, rng.integer(1, 3), seed % 2 == 1 ? P : 1, D}, P};
    }
    case Layout::pattern_axis0: {
        const std::int64_t P = rng.integer(2, 4);
        return {{seed == 2 ? 1 : P, D}, P};
    }
    }
    return {};
}

GroupingSpec grouping_for(GroupingSpec::Kind kind, std::int64_t num_tokens, int seed, Rng &rng) {
    constexpr std::int64_t M = 3;
    switch (kind) {
    case GroupingSpec::Kind::none: return GroupingSpec::none();
    case GroupingSpec::Kind::sizes: return GroupingSpec::by_sizes(random_sizes_with_empty(num_tokens, M, seed % M, rng));
    case GroupingSpec::Kind::ids: {
        std::vector<std::int32_t> ids = random_ids(num_tokens, M, rng);
        ids.front() = M - 1;  // surely not sorted
        ids.back() = 0;
        return GroupingSpec::by_ids(std::move(ids), M);
    }
    case GroupingSpec::Kind::dispatcher: return GroupingSpec::by_dispatcher(random_ids(num_tokens, M, rng), M);
    }
    return GroupingSpec::none();
}

// Seed 1 sets config.out_dtype; seed 2 passes the out dtype per call, or nothing when it is the
// input's; seed 3 overrides a different config.out_dtype per call.
void choose_out_dtype(NormCase &c, DType in, DType out, int seed) {
    if (seed == 1) {
        c.config.out_dtype = out;
    } else if (seed == 2) {
        if (out != in) c.out_override = out;
    } else {
        c.config.out_dtype = out == DType::f32 ? DType::bf16 : DType::f32;
        c.out_override = out;
    }
}

class Contract : public testing::TestWithParam<ContractParam> {};

TEST_P(Contract, ThreeGates) {
    const ContractParam &p = GetParam();
    for (const LayoutRun &run : runs_of(p)) {
        SCOPED_TRACE(std::string("layout ") + layout_name(run.layout));
        for (int seed = 1; seed <= 3; ++seed) {
            SCOPED_TRACE("seed " + std::to_string(seed));
            for (GroupingSpec::Kind kind : groupings_for(run.layout)) {
                Rng rng(std::hash<std::string>{}(name_of(p) + layout_name(run.layout)) + 7919u * seed +
                        static_cast<unsigned>(kind));
                const Shapes shapes = shapes_for(p.dim, run.layout, seed, rng);
                const ref::HostTensor x = random_input(p.in, shapes.x, rng);

                NormCase c;
                c.grouping = grouping_for(kind, shapes.x[0], seed, rng);
                c.config.dim = p.dim;
                c.config.num_modality = c.grouping.num_modality;
                c.config.num_patterns = shapes.num_patterns;
                c.x = x.view();
                // A flat weight, or one shaped [M, P, D]: only the count and the order matter.
                const std::int64_t M = c.config.num_modality, P = shapes.num_patterns;
                const ref::Shape weight_shape = seed == 3 ? ref::Shape{M, P, p.dim} : ref::Shape{M * P * p.dim};
                c.weight = random_weight(run.weight, weight_shape, rng);
                choose_out_dtype(c, p.in, p.out, seed);
                expect_contract(c);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Contract, testing::ValuesIn(all_params()), param_name);

// The CPU schedule computes the sums of squares of a token's rows in chunks of about 16 KiB of
// input (schedules/cpu_schedule.cpp), its last chunk shifted back over the one before: 7 heads of
// 3072 BF16 or 1536 FP32 make chunks of 2 rows, 7 of 3072 FP32 chunks of one, and 5 patterns of
// 1536 BF16 one chunk. Three modalities by ids, so that no regrouping of rows applies.
TEST(Chunks, TokensOfRowsInChunksWithTheLastShifted) {
    Rng rng(4242);
    struct Run {
        DType in, out;
        ref::Shape x;
        std::int64_t num_patterns;
    };
    for (const Run &run : {Run{DType::bf16, DType::bf16, {3, 7, 3072}, 1}, Run{DType::bf16, DType::f32, {3, 7, 3072}, 1},
                           Run{DType::f32, DType::f32, {3, 7, 3072}, 1}, Run{DType::f32, DType::f32, {4, 7, 1536}, 1},
                           Run{DType::bf16, DType::bf16, {4, 5, 1536}, 5}}) {
        const ref::HostTensor x = random_input(run.in, run.x, rng);
        NormCase c;
        c.grouping = grouping_for(GroupingSpec::Kind::ids, run.x[0], 1, rng);
        c.config.dim = run.x.back();
        c.config.num_modality = c.grouping.num_modality;
        c.config.num_patterns = run.num_patterns;
        c.config.out_dtype = run.out;
        c.x = x.view();
        c.weight = random_weight(DType::bf16, {c.config.num_modality * run.num_patterns * c.config.dim}, rng);
        expect_contract(c);
    }
}

}  // namespace
}  // namespace contract
