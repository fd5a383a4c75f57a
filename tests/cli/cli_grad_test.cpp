// `magi2-norm grad` on every golden gradient case of SPEC.md: dx_f32 and dscale_f32 within B1
// and B2 of the stored float64 results, dx and dweight in their dtypes the RNE casts of the run's
// own FP32 results (B3); bad input exits with the library's named error.
#include <gtest/gtest.h>

#include <fstream>

#include "backward_case.hpp"
#include "cli_support.hpp"
#include "reference/gates.hpp"
#include "reference/safetensors_file.hpp"

using magi2norm::DType;

namespace {

std::vector<double> doubles(const ref::HostTensor &t) {
    std::vector<double> v;
    for (std::int64_t i = 0; i < t.size(); ++i) v.push_back(t.get(i));
    return v;
}

class CliGrad : public testing::TestWithParam<const char *> {};

TEST_P(CliGrad, MatchesStoredOracle) {
    cli_test::TempDir dir;
    const std::string in = std::string(MAGI2NORM_GOLDEN_GRAD_DIR) + "/" + GetParam() + ".safetensors";
    const std::string out = dir.file("out.safetensors");
    const cli_test::ProcessResult run = cli_test::run_cli({"grad", in, out}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    const ref::SafetensorsFile golden = ref::SafetensorsFile::read(in), result = ref::SafetensorsFile::read(out);
    EXPECT_EQ(result.names(), (std::vector<std::string>{"dscale_f32", "dweight", "dx", "dx_f32"}));
    const ref::HostTensor dx = result.tensor("dx"), dx_f32 = result.tensor("dx_f32");
    const ref::HostTensor dweight = result.tensor("dweight"), dscale_f32 = result.tensor("dscale_f32");
    const std::vector<double> dx_oracle = doubles(golden.tensor("dx_oracle")), dscale = doubles(golden.tensor("dscale_oracle"));
    const std::vector<double> bound = doubles(golden.tensor("dscale_bound"));
    EXPECT_TRUE(backward_test::b1_close(dx_f32, dx_oracle));
    EXPECT_TRUE(backward_test::b2_close(dscale_f32, dscale, bound));
    EXPECT_EQ(magi2norm::dtype_name(dx.dtype()), golden.metadata().at("dx_dtype"));
    EXPECT_EQ(dweight.dtype(), golden.tensor("weight").dtype());
    if (dx.dtype() == DType::f32) {
        EXPECT_TRUE(ref::identical(dx.view(), dx_f32.view()));
    } else {
        // B3's cancelling terms of dx from the backward suite's oracle (the files hold results only).
        const backward_test::Inputs inputs = backward_test::golden_inputs(golden);
        EXPECT_TRUE(backward_test::b3_one_ulp(dx, dx_f32, dx_oracle, backward_test::oracle(inputs.problem()).dx_terms));
    }
    if (dweight.dtype() != DType::f32) {
        EXPECT_TRUE(backward_test::b3_one_ulp(dweight, dscale_f32, dscale, bound));
    }
    EXPECT_EQ(result.metadata().at("dx_dtype"), golden.metadata().at("dx_dtype"));
}

INSTANTIATE_TEST_SUITE_P(Golden, CliGrad,
                         testing::Values("grad_groups_m3_sizes_f32", "grad_heads_m2_ids_bf16_f32", "grad_plain_bf16_d64",
                                         "grad_singleton_p4_f16"));

// --dx-dtype overrides the file's dx_dtype; a bad one is a usage error (exit 2).
TEST(CliGradFlags, DxDtype) {
    cli_test::TempDir dir;
    const std::string in = std::string(MAGI2NORM_GOLDEN_GRAD_DIR) + "/grad_plain_bf16_d64.safetensors";
    const std::string out = dir.file("out.safetensors");
    const cli_test::ProcessResult run = cli_test::run_cli({"grad", in, out, "--dx-dtype", "f16"}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    const ref::SafetensorsFile result = ref::SafetensorsFile::read(out);
    EXPECT_EQ(result.tensor("dx").dtype(), DType::f16);
    EXPECT_TRUE(ref::gate2_cast_of_own_f32(result.tensor("dx").view(), result.tensor("dx_f32").view()));
    const cli_test::ProcessResult bad = cli_test::run_cli({"grad", in, dir.file("bad.safetensors"), "--dx-dtype", "f64"}, dir);
    EXPECT_TRUE(bad.exited && bad.status == 2) << cli_test::describe(bad);
}

// A file without dy is refused (exit 1) naming the missing tensor, and OUT is not written.
TEST(CliGradErrors, MissingDy) {
    cli_test::TempDir dir;
    const std::vector<std::string> names = cli_test::golden_names();
    ASSERT_FALSE(names.empty()) << "no golden files in " << MAGI2NORM_GOLDEN_DIR;
    const std::string in = cli_test::golden_path(names.front());
    const std::string out = dir.file("out.safetensors");
    const cli_test::ProcessResult run = cli_test::run_cli({"grad", in, out}, dir);
    EXPECT_TRUE(run.exited && run.status == 1) << cli_test::describe(run);
    EXPECT_NE(run.err.find("dy"), std::string::npos) << run.err;
    EXPECT_FALSE(std::ifstream(out).good());
}

}  // namespace
