// `magi2-norm mhc-logits`: a file of x [T, S, C] BF16, a weight, phi and group sizes gives logits
// within SPEC.md's L1 of a float64 evaluation here and the norm's inverse RMS; a BF16 phi exits
// with the library's dtype error and leaves no OUT.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "cli_support.hpp"
#include "reference/float16.hpp"
#include "reference/safetensors_file.hpp"

namespace {

constexpr std::int64_t T = 5, S = 2, C = 24, D = S * C, N = 3;

struct Inputs {
    std::vector<std::uint16_t> x;
    std::vector<float> weight, phi;
    std::vector<std::int32_t> sizes = {3, 2};
    Inputs() {
        for (std::int64_t i = 0; i < T * D; ++i) x.push_back(ref::f32_to_bf16(std::sin(0.37f * static_cast<float>(i)) * 2.0f));
        for (std::int64_t i = 0; i < 2 * D; ++i) weight.push_back(0.01f * static_cast<float>(i % 17) - 0.08f);
        for (std::int64_t i = 0; i < D * N; ++i) phi.push_back(std::cos(0.11f * static_cast<float>(i)) * 0.1f);
    }
    void write(const std::string &path, const char *phi_dtype, const void *phi_data) const {
        magi2norm::safetensors::write(path, {{"x", "BF16", {T, S, C}, x.data()}, {"weight", "F32", {2 * D}, weight.data()},
                                             {"phi", phi_dtype, {D, N}, phi_data}, {"group_sizes", "I32", {2}, sizes.data()}},
                                      {{"num_modality", "2"}, {"eps", "1e-06"}});
    }
};

TEST(CliMhcLogits, WithinL1OfFloat64) {
    cli_test::TempDir dir;
    const Inputs in;
    in.write(dir.file("in.safetensors"), "F32", in.phi.data());
    const cli_test::ProcessResult run = cli_test::run_cli({"mhc-logits", dir.file("in.safetensors"), dir.file("out.safetensors")}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    const ref::SafetensorsFile out = ref::SafetensorsFile::read(dir.file("out.safetensors"));
    const ref::HostTensor logits = out.tensor("logits"), inverse_rms = out.tensor("inverse_rms");
    ASSERT_EQ(logits.size(), T * N);
    for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t m = t < in.sizes[0] ? 0 : 1;
        double squares = 0;
        for (std::int64_t d = 0; d < D; ++d) squares += std::pow(double(ref::bf16_to_f32(in.x[t * D + d])), 2);
        const double inv = 1 / std::sqrt(squares / D + 1e-6);
        EXPECT_NEAR(inverse_rms.get(t), inv, 1e-6 * inv);
        for (std::int64_t j = 0; j < N; ++j) {
            double r = 0, a = 0, p = 0;
            for (std::int64_t d = 0; d < D; ++d) {
                const double y = double(ref::bf16_to_f32(in.x[t * D + d])) * inv * double(in.weight[m * D + d] + 1.0f);
                r += y * in.phi[d * N + j];
                a += std::fabs(y * in.phi[d * N + j]);
                p += std::fabs(in.phi[d * N + j]);
            }
            EXPECT_LE(std::fabs(logits.get(t * N + j) - r), std::ldexp(a, -20) + std::ldexp(p, -40)) << t << ", " << j;
        }
    }
}

TEST(CliMhcLogits, ABf16PhiIsRefusedAndWritesNothing) {
    cli_test::TempDir dir;
    const Inputs in;
    const std::vector<std::uint16_t> phi16(static_cast<std::size_t>(D * N), 0x3f80);
    in.write(dir.file("in.safetensors"), "BF16", phi16.data());
    const cli_test::ProcessResult run = cli_test::run_cli({"mhc-logits", dir.file("in.safetensors"), dir.file("out.safetensors")}, dir);
    EXPECT_TRUE(run.exited && run.status == 1) << cli_test::describe(run);
    EXPECT_NE(run.err.find("dtype: mhc_logits: phi must be f32"), std::string::npos) << run.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.safetensors")));
}

}  // namespace
