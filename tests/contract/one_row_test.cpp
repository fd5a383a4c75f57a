// The one-row form (the cpu_row variants: a call of one dense row, as a decode step makes, with
// the scale block of the row's modality picked by the runtime) schedules the element form's
// algorithm without its strides, grouping and tasks, so its bits must equal the element form's.
// Each case normalizes a row alone (one-row form) and as the first token of a two-token call
// (element form, same modality), and compares the row's outputs bit for bit; which variant ran
// is checked through last_variant(). The gates of SPEC.md for one-row calls are checked by the
// rest of the suite, which makes many of them.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"

namespace contract {
namespace {

bool on_cpu() { return magi2norm::default_backend() == magi2norm::Backend::cpu; }

bool ran_one_row_form() {
    const std::string name = magi2norm::last_variant();
    return name.rfind("magi2_norm_cpu_row_", 0) == 0;
}

struct Grouped {
    const char *name;
    std::int64_t num_modality;
    GroupingSpec one, two;  // the row alone; the row then a second token of the same modality
};

TEST(OneRow, SameBitsAsTheElementForm) {
    Rng rng(83);
    const Grouped groupings[] = {
        {"one modality", 1, GroupingSpec::none(), GroupingSpec::none()},
        {"M = 3 by sizes, the row in modality 2", 3, GroupingSpec::by_sizes({0, 0, 1}), GroupingSpec::by_sizes({0, 0, 2})},
        {"M = 3 by ids, the row in modality 1", 3, GroupingSpec::by_ids({1}, 3), GroupingSpec::by_ids({1, 1}, 3)},
    };
    const DType dtypes[] = {DType::f32, DType::bf16, DType::f16};
    for (const DType in : dtypes) {
        for (const DType out : dtypes) {
            for (const std::int64_t dim : {1, 5, 16, 48, 100, 128, 3072, 12288}) {
                for (const Grouped &g : groupings) {
                    SCOPED_TRACE(std::string(magi2norm::dtype_name(in)) + " -> " + magi2norm::dtype_name(out) + ", D = " +
                                 std::to_string(dim) + ", " + g.name);
                    ref::HostTensor x = random_input(in, {2, dim}, rng);
                    if (dim == 128) {  // the row carries NaN, infinity and a subnormal
                        x.set(3, std::numeric_limits<float>::quiet_NaN());
                        x.set(7, std::numeric_limits<float>::infinity());
                        x.set(9, 1e-40f);
                    }
                    const ref::HostTensor w = random_weight(DType::bf16, {g.num_modality * dim}, rng);
                    const magi2norm::RMSNorm norm({dim, 1e-6f, g.num_modality}, w.view());

                    ref::HostTensor alone(out, {1, dim});
                    norm.forward(magi2norm::ConstTensorView(x.data(), in, {1, dim}), g.one.library(), alone.view(), out);
                    if (on_cpu()) EXPECT_TRUE(ran_one_row_form()) << magi2norm::last_variant();

                    ref::HostTensor pair(out, {2, dim});
                    norm.forward(x.view(), g.two.library(), pair.view(), out);
                    if (on_cpu()) EXPECT_FALSE(ran_one_row_form()) << magi2norm::last_variant();

                    ref::HostTensor first(out, {1, dim});
                    std::memcpy(first.data(), pair.data(), static_cast<std::size_t>(dim) * ref::element_size(out));
                    EXPECT_TRUE(ref::identical(alone.view(), first.view()));
                }
            }
        }
    }
}

// Rows that are not one dense row keep the other forms: a strided row, a row broadcast onto
// patterns, two heads.
TEST(OneRow, OnlyOneDenseRowTakesIt) {
    if (!on_cpu()) GTEST_SKIP() << "the one-row form is a CPU form";
    Rng rng(89);
    const ref::HostTensor x = random_input(DType::f32, {1, 2, 64}, rng);
    ref::HostTensor out(DType::f32, {1, 2, 64});

    const magi2norm::RMSNorm norm({64, 1e-6f, 1}, random_weight(DType::bf16, {64}, rng).view());
    norm.forward(x.view(), magi2norm::Grouping::none(), out.view());
    EXPECT_FALSE(ran_one_row_form()) << "two heads: " << magi2norm::last_variant();

    // Every other element of the first 128.
    norm.forward(magi2norm::ConstTensorView(x.data(), DType::f32, {1, 64}, {128, 2}), magi2norm::Grouping::none(),
                 magi2norm::TensorView(out.data(), DType::f32, {1, 64}));
    EXPECT_FALSE(ran_one_row_form()) << "a strided row: " << magi2norm::last_variant();

    const magi2norm::RMSNorm patterns({64, 1e-6f, 1, 2}, random_weight(DType::bf16, {2 * 64}, rng).view());
    patterns.forward(magi2norm::ConstTensorView(x.data(), DType::f32, {1, 1, 64}), magi2norm::Grouping::none(), out.view());
    EXPECT_FALSE(ran_one_row_form()) << "one row onto P = 2: " << magi2norm::last_variant();

    norm.forward(magi2norm::ConstTensorView(x.data(), DType::f32, {1, 64}), magi2norm::Grouping::none(),
                 magi2norm::TensorView(out.data(), DType::f32, {1, 64}));
    EXPECT_TRUE(ran_one_row_form()) << "one dense row: " << magi2norm::last_variant();
}

}  // namespace
}  // namespace contract
