// `magi2-norm apply` on every golden case of SPEC.md reproduces its y and y_f32 under the
// numerical contract: y_f32 within rtol = atol = 1e-6, a BF16/FP16 y bit-exact to the RNE cast
// of the run's own y_f32 and within one local ULP of the golden y.
#include <gtest/gtest.h>

#include "cli_support.hpp"
#include "reference/gates.hpp"

namespace st = magi2norm::safetensors;
using magi2norm::DType;

namespace {

TEST(CliGoldenFolder, HasCases) {
    EXPECT_FALSE(cli_test::golden_names().empty()) << "no golden files in " << MAGI2NORM_GOLDEN_DIR;
}

class CliGolden : public testing::TestWithParam<std::string> {};

TEST_P(CliGolden, ApplyMatchesGolden) {
    cli_test::TempDir dir;
    const std::string in = cli_test::golden_path(GetParam()), out = dir.file("out.safetensors");
    const cli_test::ProcessResult run = cli_test::run_cli({"apply", in, out}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);

    const st::File golden = st::File::open(in), result = st::File::open(out);
    EXPECT_EQ(result.names(), (std::vector<std::string>{"y", "y_f32"}));
    const magi2norm::ConstTensorView y = result.view("y"), y_f32 = result.view("y_f32");
    const magi2norm::ConstTensorView golden_y = golden.view("y");
    ASSERT_EQ(y.dtype, golden_y.dtype);
    ASSERT_EQ(y.shape, golden_y.shape);
    EXPECT_EQ(y_f32.dtype, DType::f32);

    EXPECT_TRUE(ref::gate1_close(y_f32, golden.view("y_f32")));
    if (y.dtype == DType::f32) {
        EXPECT_TRUE(ref::identical(y, y_f32));
        EXPECT_TRUE(ref::gate1_close(y, golden_y));
    } else {
        EXPECT_TRUE(ref::gate2_cast_of_own_f32(y, y_f32));
        EXPECT_TRUE(ref::gate3_within_local_ulp(y, golden_y));
    }
    // OUT keeps IN's parameters and records the output dtype.
    for (const char *key : {"dim", "eps", "num_modality", "num_patterns", "out_dtype"}) {
        EXPECT_EQ(result.metadata().at(key), golden.metadata().at(key)) << key;
    }
}

INSTANTIATE_TEST_SUITE_P(Golden, CliGolden, testing::ValuesIn(cli_test::golden_names()),
                         [](const testing::TestParamInfo<std::string> &param_info) { return param_info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CliGolden);

}  // namespace
