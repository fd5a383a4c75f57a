// `magi2-norm apply` on every golden case of SPEC.md reproduces its y and y_f32 under the
// numerical contract: y_f32 within rtol = atol = 1e-6, a BF16/FP16 y bit-exact to the RNE cast
// of the run's own y_f32 and within one local ULP of the golden y.
#include <gtest/gtest.h>

#include "cli_support.hpp"
#include "reference/gates.hpp"
#include "reference/safetensors_file.hpp"

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

    // Both files are read by the tests' own reader, not the library's that wrote `out`.
    const ref::SafetensorsFile golden = ref::SafetensorsFile::read(in), result = ref::SafetensorsFile::read(out);
    EXPECT_EQ(result.names(), (std::vector<std::string>{"y", "y_f32"}));
    const ref::HostTensor y = result.tensor("y"), y_f32 = result.tensor("y_f32"), golden_y = golden.tensor("y");
    ASSERT_EQ(y.dtype(), golden_y.dtype());
    ASSERT_EQ(y.shape(), golden_y.shape());
    EXPECT_EQ(y_f32.dtype(), DType::f32);

    EXPECT_TRUE(ref::gate1_close(y_f32.view(), golden.tensor("y_f32").view()));
    if (y.dtype() == DType::f32) {
        EXPECT_TRUE(ref::identical(y.view(), y_f32.view()));
        EXPECT_TRUE(ref::gate1_close(y.view(), golden_y.view()));
    } else {
        EXPECT_TRUE(ref::gate2_cast_of_own_f32(y.view(), y_f32.view()));
        EXPECT_TRUE(ref::gate3_within_local_ulp(y.view(), golden_y.view()));
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
