// ModalityDispatcher against plain definitions: the permutation is a stable argsort of the
// mapping, the inverse undoes it, the group sizes are bincount(minlength=M), dispatch gathers
// rows by the permutation and undispatch scatters them back. And the norm does not care which
// way it is told the modalities: by ids in original order, or by the dispatcher's group sizes in
// dispatched order, the results are bit-identical once undispatched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"
#include "throws_error.hpp"

namespace contract {
namespace {

using magi2norm::ModalityDispatcher;

std::vector<std::int64_t> stable_argsort(const std::vector<std::int32_t> &ids) {
    std::vector<std::int64_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return ids[a] < ids[b]; });
    return order;
}

struct Mapping {
    std::string name;
    std::vector<std::int32_t> ids;
    std::int64_t num_modality;
};

std::vector<Mapping> mappings() {
    Rng rng(17);
    std::vector<std::int32_t> no_middle = random_ids(200, 2, rng);
    for (std::int32_t &id : no_middle) id *= 2;  // ids 0 and 2 only: modality 1 is empty
    return {
        {"random M=3", random_ids(1000, 3, rng), 3},
        {"empty middle group", no_middle, 3},
        {"empty last groups", {1, 0, 1, 1, 0}, 5},
        {"one modality", random_ids(17, 1, rng), 1},
        {"already sorted", {0, 0, 1, 1, 1, 2}, 3},
        {"reversed", {2, 2, 1, 0, 0}, 3},
        {"no tokens", {}, 3},
    };
}

TEST(Dispatcher, MatchesStableArgsortAndBincount) {
    for (const Mapping &m : mappings()) {
        SCOPED_TRACE(m.name);
        const ModalityDispatcher dispatcher(m.ids.data(), static_cast<std::int64_t>(m.ids.size()), m.num_modality);
        const std::vector<std::int64_t> sizes = bincount(m.ids, m.num_modality);
        std::vector<std::int64_t> cumulative(1, 0);
        for (std::int64_t size : sizes) cumulative.push_back(cumulative.back() + size);

        EXPECT_EQ(dispatcher.num_tokens(), static_cast<std::int64_t>(m.ids.size()));
        EXPECT_EQ(dispatcher.num_modality(), m.num_modality);
        EXPECT_EQ(dispatcher.permutation(), stable_argsort(m.ids));
        EXPECT_EQ(dispatcher.group_sizes(), sizes);
        EXPECT_EQ(dispatcher.cumulative_sizes(), cumulative);
        const std::vector<std::int64_t> &perm = dispatcher.permutation();
        const std::vector<std::int64_t> &inverse = dispatcher.inverse_permutation();
        ASSERT_EQ(inverse.size(), perm.size());
        for (std::size_t i = 0; i < perm.size(); ++i) {
            ASSERT_EQ(inverse[static_cast<std::size_t>(perm[i])], static_cast<std::int64_t>(i)) << "at " << i;
        }
        EXPECT_EQ(magi2norm::Grouping::from(dispatcher).group_sizes(), sizes);
    }
}

// Ids are int32: more modalities than that is a config error (it allocated, or threw
// std::length_error, before).
TEST(Dispatcher, RejectsMoreModalitiesThanInt32Ids) {
    const std::vector<std::int32_t> ids = {0, 1};
    EXPECT_TRUE(throws_error([&] { ModalityDispatcher(ids.data(), 2, std::int64_t{1} << 40); }, magi2norm::ErrorCode::config,
                             {"num_modality"}));
    EXPECT_TRUE(throws_error([&] { ModalityDispatcher(ids.data(), 2, INT64_MAX); }, magi2norm::ErrorCode::config,
                             {"num_modality"}));
}

TEST(Dispatcher, RejectsIdsOutOfRange) {
    const std::vector<std::int32_t> too_large = {0, 2, 3, 1};
    EXPECT_TRUE(throws_error([&] { ModalityDispatcher(too_large.data(), 4, 3); }, magi2norm::ErrorCode::modality_id,
                             {"modality id"}));
    const std::vector<std::int32_t> negative = {0, -1, 1};
    EXPECT_TRUE(throws_error([&] { ModalityDispatcher(negative.data(), 3, 3); }, magi2norm::ErrorCode::modality_id,
                             {"modality id"}));
}

// rows[i] = x[source[i]] along axis 0, by bytes.
ref::HostTensor gather_rows(const ref::HostTensor &x, const std::vector<std::int64_t> &source) {
    ref::HostTensor rows(x.dtype(), x.shape());
    const std::size_t row_bytes = x.bytes().size() / static_cast<std::size_t>(x.shape()[0]);
    for (std::size_t i = 0; i < source.size(); ++i) {
        std::memcpy(static_cast<unsigned char *>(rows.data()) + i * row_bytes,
                    x.bytes().data() + static_cast<std::size_t>(source[i]) * row_bytes, row_bytes);
    }
    return rows;
}

TEST(Dispatcher, DispatchAndUndispatchRoundTrip) {
    Rng rng(23);
    constexpr std::int64_t T = 41;
    const std::vector<std::int32_t> ids = random_ids(T, 3, rng);
    const ModalityDispatcher dispatcher(ids.data(), T, 3);
    for (DType dtype : {DType::f32, DType::bf16}) {
        for (const ref::Shape &shape : {ref::Shape{T, 96}, ref::Shape{T, 6, 32}}) {
            SCOPED_TRACE(std::string(magi2norm::dtype_name(dtype)) + " " + ref::format_shape(shape));
            const ref::HostTensor x = random_input(dtype, shape, rng);
            ref::HostTensor dispatched(dtype, shape), restored(dtype, shape);
            dispatcher.dispatch(x.view(), dispatched.view());
            EXPECT_TRUE(ref::identical(dispatched.view(), gather_rows(x, stable_argsort(ids)).view()));
            dispatcher.undispatch(dispatched.view(), restored.view());
            EXPECT_TRUE(ref::identical(restored.view(), x.view()));
        }
    }
}

TEST(Dispatcher, NormByIdsEqualsUndispatchedNormOfDispatched) {
    Rng rng(29);
    constexpr std::int64_t T = 37, M = 3;
    const std::vector<std::int32_t> ids = random_ids(T, M, rng);
    const ModalityDispatcher dispatcher(ids.data(), T, M);
    struct Layout {
        ref::Shape x;
        std::int64_t num_patterns;
    };
    for (const Layout &layout : {Layout{{T, 128}, 1}, Layout{{T, 4, 128}, 1}, Layout{{T, 3, 64}, 3}}) {
        for (DType out_dtype : {DType::bf16, DType::f32}) {
            SCOPED_TRACE(ref::format_shape(layout.x) + " P=" + std::to_string(layout.num_patterns) + " out " +
                         magi2norm::dtype_name(out_dtype));
            const ref::HostTensor x = random_input(DType::bf16, layout.x, rng);
            NormCase by_ids;
            by_ids.config.dim = layout.x.back();
            by_ids.config.num_modality = M;
            by_ids.config.num_patterns = layout.num_patterns;
            by_ids.config.out_dtype = out_dtype;
            by_ids.weight = random_weight(DType::bf16, {M * layout.num_patterns * layout.x.back()}, rng);
            by_ids.x = x.view();
            by_ids.grouping = GroupingSpec::by_ids(ids, M);
            const ref::HostTensor direct = run_library(by_ids);

            ref::HostTensor x_dispatched(DType::bf16, layout.x);
            dispatcher.dispatch(x.view(), x_dispatched.view());
            NormCase by_dispatcher = by_ids;
            by_dispatcher.x = x_dispatched.view();
            by_dispatcher.grouping = GroupingSpec::by_dispatcher(ids, M);
            const ref::HostTensor y_dispatched = run_library(by_dispatcher);
            ref::HostTensor undispatched(out_dtype, y_dispatched.shape());
            dispatcher.undispatch(y_dispatched.view(), undispatched.view());

            EXPECT_TRUE(ref::identical(undispatched.view(), direct.view()));
        }
    }
}

}  // namespace
}  // namespace contract
