// `magi2-norm demo` at a small token count: it must pass its own checks and, with --json, print
// one parseable object per case with the documented keys.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace {

TEST(CliDemo, JsonLinesHaveTheDocumentedKeys) {
    cli_test::TempDir dir;
    const cli_test::ProcessResult run = cli_test::run_cli({"demo", "--tokens", "64", "--json"}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);

    std::istringstream lines(run.out);
    std::string line;
    int cases = 0;
    while (std::getline(lines, line)) {
        SCOPED_TRACE(line);
        const nlohmann::json j = nlohmann::json::parse(line);  // throws (fails the test) if not JSON
        for (const char *key : {"name", "shape", "in_dtype", "out_dtype", "num_modality", "grouping", "tokens",
                                "seconds", "bytes", "gbps", "copy_gbps", "fraction_of_copy", "max_abs_err", "check", "variant"}) {
            EXPECT_TRUE(j.contains(key)) << key;
        }
        EXPECT_EQ(j.at("check"), "pass");
        EXPECT_EQ(j.at("tokens"), 64);
        ASSERT_TRUE(j.at("shape").is_array());
        EXPECT_EQ(j.at("shape").at(0), 64);
        EXPECT_GT(j.at("seconds").get<double>(), 0.0);
        EXPECT_GT(j.at("gbps").get<double>(), 0.0);
        EXPECT_GT(j.at("copy_gbps").get<double>(), 0.0);
        // 64 tokens are far below the streaming policy's outputs: the ordinary CPU variant, in
        // its paired-word form for BF16 -> BF16 (the model's widths are multiples of 16), or a
        // tuning class's variant of that kind ("cpu_t1_...", a tuned build); BF16 outputs take
        // the AVX-512 BF16 element form on a CPU with it.
        const std::string in = j.at("in_dtype"), out = j.at("out_dtype");
        const std::string form = in == "bf16" && out == "bf16" ? "paired_" : "";
        const std::string native = out == "bf16" ? "|avx512bf16_" : "";
        EXPECT_TRUE(std::regex_match(j.at("variant").get<std::string>(),
                                     std::regex("magi2_norm_cpu_(t[0-9]+_)?(" + form + native + ")" + in + "_" + out)))
            << j.at("variant");
        ++cases;
    }
    // The model's table: pre-norm (M = 1, by sizes, by ids), Q/K, mHC (f32, bf16 out), final.
    EXPECT_EQ(cases, 7);
}

TEST(CliDemo, TableAndOddTokenCounts) {
    cli_test::TempDir dir;
    const cli_test::ProcessResult run = cli_test::run_cli({"demo", "--tokens", "5", "--threads", "1"}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    EXPECT_NE(run.out.find("pre_norm/bf16_bf16/M3_ids"), std::string::npos) << run.out;
    EXPECT_EQ(run.out.find("FAIL"), std::string::npos) << run.out;
}

TEST(CliDemo, BadTokenCountIsAUsageError) {
    cli_test::TempDir dir;
    const cli_test::ProcessResult run = cli_test::run_cli({"demo", "--tokens", "0"}, dir);
    EXPECT_TRUE(run.exited && run.status == 2) << cli_test::describe(run);
}

}  // namespace
