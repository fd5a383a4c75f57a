// magi2-norm on bad input: malformed files and arguments the library refuses exit 1 with a
// message, command-line mistakes exit 2 with the usage, and nothing crashes or writes OUT.
// Also: flags override the file's metadata, and I64 group sizes are read like I32 ones.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "cli_support.hpp"
#include "reference/gates.hpp"

namespace st = magi2norm::safetensors;

namespace {

class CliErrors : public testing::Test {
protected:
    // Runs `apply IN OUT extra...` and expects an orderly exit with `status` naming `problem`.
    void expect_apply_fails(const std::string &in, int status, const std::string &problem,
                            const std::vector<std::string> &extra = {}) {
        std::vector<std::string> args{"apply", in, out_};
        args.insert(args.end(), extra.begin(), extra.end());
        const cli_test::ProcessResult run = cli_test::run_cli(args, dir_);
        EXPECT_TRUE(run.exited && run.status == status) << cli_test::describe(run);
        EXPECT_EQ(run.err.rfind("magi2-norm: error: ", 0), 0u) << run.err;
        EXPECT_EQ(run.err.find("error: magi2norm: "), std::string::npos) << "doubled prefix: " << run.err;
        EXPECT_NE(run.err.find(problem), std::string::npos) << "expected '" << problem << "' in: " << run.err;
        EXPECT_FALSE(std::filesystem::exists(out_)) << "OUT written by a failed run";
    }

    // A copy of golden file `name` with its tensors passed through `edit`.
    template <typename Edit>
    std::string edited_golden(const std::string &name, Edit &&edit) {
        const st::File golden = st::File::open(cli_test::golden_path(name));
        std::vector<st::OutputTensor> tensors = cli_test::tensors_of(golden);
        std::map<std::string, std::string> metadata = golden.metadata();
        edit(tensors, metadata);
        const std::string path = dir_.file("edited_" + name + ".safetensors");
        st::write(path, tensors, metadata);
        return path;
    }

    static st::OutputTensor &find(std::vector<st::OutputTensor> &tensors, const std::string &name) {
        for (st::OutputTensor &t : tensors) {
            if (t.name == name) return t;
        }
        throw std::runtime_error("no tensor " + name);
    }

    cli_test::TempDir dir_;
    std::string out_ = dir_.file("out.safetensors");
};

TEST_F(CliErrors, TruncatedFile) {
    const std::string bytes = cli_test::read_file(cli_test::golden_path("plain_f32_d64"));
    const std::string in = dir_.file("truncated.safetensors");
    cli_test::write_file(in, bytes.substr(0, bytes.size() / 2));
    expect_apply_fails(in, 1, "beyond the data section");
    cli_test::write_file(in, bytes.substr(0, 100));
    expect_apply_fails(in, 1, "exceeds the file size");
    cli_test::write_file(in, bytes.substr(0, 5));
    expect_apply_fails(in, 1, "shorter than the 8-byte header length");
}

TEST_F(CliErrors, BadJson) {
    const std::string in = dir_.file("bad.safetensors");
    cli_test::write_file(in, cli_test::safetensors_bytes(R"({"x": {"dtype": "F32", "shape": [1],)"));
    expect_apply_fails(in, 1, "not valid JSON");
}

TEST_F(CliErrors, MissingFile) { expect_apply_fails(dir_.file("nothing-here.safetensors"), 1, "cannot open"); }

TEST_F(CliErrors, MissingX) {
    const std::string in = edited_golden("plain_f32_d64", [](auto &tensors, auto &) {
        tensors.erase(tensors.begin());  // x comes first in the golden files
    });
    expect_apply_fails(in, 1, "no tensor named 'x'");
}

TEST_F(CliErrors, XOfAnIntegerDtype) {
    const std::string in = edited_golden("plain_f32_d64", [](auto &tensors, auto &) { find(tensors, "x").dtype = "I32"; });
    expect_apply_fails(in, 1, "I32");
}

TEST_F(CliErrors, WrongWeightSize) {
    const std::string in = edited_golden("plain_f32_d64", [](auto &tensors, auto &) {
        find(tensors, "weight").shape = {63};
    });
    expect_apply_fails(in, 1, "weight");
}

TEST_F(CliErrors, ModalityIdOutOfRange) {
    for (const std::int32_t bad_id : {3, -1}) {
        std::vector<std::int32_t> ids;
        const std::string in = edited_golden("groups_m3_ids", [&](auto &tensors, auto &) {
            st::OutputTensor &modality = find(tensors, "modality");
            ids.assign(static_cast<const std::int32_t *>(modality.data),
                       static_cast<const std::int32_t *>(modality.data) + modality.shape[0]);
            ids[5] = bad_id;
            modality.data = ids.data();
        });
        expect_apply_fails(in, 1, "modality");
    }
}

TEST_F(CliErrors, GroupSizesThatDoNotSum) {
    const std::vector<std::int32_t> sizes = {1, 2, 3};
    const std::string in = edited_golden("groups_m3_sizes", [&](auto &tensors, auto &) {
        find(tensors, "group_sizes").data = sizes.data();
    });
    expect_apply_fails(in, 1, "group");
}

TEST_F(CliErrors, BadMetadataValue) {
    const std::string in = edited_golden("plain_f32_d64", [](auto &, auto &metadata) { metadata["dim"] = "sixty-four"; });
    expect_apply_fails(in, 1, "__metadata__ dim");
}

TEST_F(CliErrors, UsageMistakesExitTwo) {
    const std::string in = cli_test::golden_path("plain_f32_d64");
    expect_apply_fails(in, 2, "needs IN.safetensors and OUT.safetensors", {"extra-positional"});
    expect_apply_fails(in, 2, "unknown option --bogus", {"--bogus", "1"});
    expect_apply_fails(in, 2, "--dim needs an integer", {"--dim", "abc"});
    expect_apply_fails(in, 2, "--eps needs a number", {"--eps", "1e-6x"});
    expect_apply_fails(in, 2, "--out-dtype needs f32, bf16 or f16", {"--out-dtype", "f8"});
    expect_apply_fails(in, 2, "--threads needs an integer in [1, 256]", {"--threads", "0"});
    expect_apply_fails(in, 2, "--threads needs an integer in [1, 256]", {"--threads", "300"});
    expect_apply_fails(in, 2, "--dim needs a value", {"--dim"});
    expect_apply_fails(in, 2, "unknown option -o", {"-o"});
    expect_apply_fails(in, 2, "--out-dtype needs f32, bf16 or f16", {"--out-dtype", ""});
    // Numbers outside their type's range say so, rather than "not a number".
    expect_apply_fails(in, 2, "--eps needs a number within FP32's range", {"--eps", "1e50"});
    expect_apply_fails(in, 2, "--eps needs a number within FP32's range", {"--eps", "1e-50"});
    expect_apply_fails(in, 2, "--dim needs an integer within int64", {"--dim", "99999999999999999999"});

    for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{{}, {"frobnicate"}, {"apply"}}) {
        const cli_test::ProcessResult run = cli_test::run_cli(args, dir_);
        EXPECT_TRUE(run.exited && run.status == 2) << cli_test::describe(run);
        EXPECT_NE(run.err.find("usage:"), std::string::npos) << run.err;
    }
}

// OUT = IN would replace IN with the output: refused, IN untouched, also through a symlink.
TEST_F(CliErrors, OutMustNotBeIn) {
    const std::string in = dir_.file("in.safetensors"), link = dir_.file("link.safetensors");
    const std::string bytes = cli_test::read_file(cli_test::golden_path("plain_f32_d64"));
    cli_test::write_file(in, bytes);
    std::filesystem::create_symlink("in.safetensors", link);
    for (const std::string &out : {in, link}) {
        const cli_test::ProcessResult run = cli_test::run_cli({"apply", in, out}, dir_);
        EXPECT_TRUE(run.exited && run.status == 2) << cli_test::describe(run);
        EXPECT_NE(run.err.find("OUT is the same file as IN"), std::string::npos) << run.err;
        EXPECT_EQ(cli_test::read_file(in), bytes) << "IN changed";
    }
}

TEST_F(CliErrors, ScalarX) {
    const std::string in = edited_golden("plain_f32_d64", [](auto &tensors, auto &) { find(tensors, "x").shape = {}; });
    expect_apply_fails(in, 1, "x is a scalar");
}

TEST_F(CliErrors, HelpExitsZero) {
    for (const char *flag : {"--help", "-h"}) {
        const cli_test::ProcessResult run = cli_test::run_cli({flag}, dir_);
        EXPECT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
        EXPECT_NE(run.out.find("magi2-norm apply IN.safetensors OUT.safetensors"), std::string::npos) << run.out;
    }
}

TEST_F(CliErrors, LibraryRefusalsOfFlagsExitOne) {
    expect_apply_fails(cli_test::golden_path("plain_f32_d64"), 1, "", {"--dim", "63"});
    expect_apply_fails(cli_test::golden_path("plain_f32_d64"), 1, "", {"--eps", "-1"});
}

TEST(CliOptions, FlagsOverrideMetadata) {
    // A file whose metadata names the wrong dim and no output dtype; the flags fix both.
    cli_test::TempDir dir;
    const std::string golden_path = cli_test::golden_path("plain_bf16_d64");
    const st::File golden = st::File::open(golden_path);
    std::map<std::string, std::string> metadata = golden.metadata();
    metadata["dim"] = "7";
    metadata.erase("out_dtype");
    const std::string in = dir.file("in.safetensors"), out = dir.file("out.safetensors");
    st::write(in, cli_test::tensors_of(golden), metadata);

    const cli_test::ProcessResult run = cli_test::run_cli({"apply", in, out, "--dim=64", "--out-dtype", "f32"}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    const st::File result = st::File::open(out);
    EXPECT_EQ(result.tensor("y").dtype, "F32");
    EXPECT_TRUE(ref::identical(result.view("y"), result.view("y_f32")));
    EXPECT_TRUE(ref::gate1_close(result.view("y_f32"), golden.view("y_f32")));
    EXPECT_EQ(result.metadata().at("dim"), "64");
    EXPECT_EQ(result.metadata().at("out_dtype"), "f32");
}

// OUT records every parameter the run used, defaults included, in canonical form.
TEST(CliOptions, OutRecordsTheParametersUsed) {
    cli_test::TempDir dir;
    const st::File golden = st::File::open(cli_test::golden_path("plain_bf16_d64"));
    const std::string in = dir.file("in.safetensors"), out = dir.file("out.safetensors");
    st::write(in, cli_test::tensors_of(golden), {});  // no __metadata__ at all

    const cli_test::ProcessResult run = cli_test::run_cli({"apply", in, out, "--eps", ".5e-5", "--dim", "064"}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    const std::map<std::string, std::string> want{
        {"dim", "64"}, {"eps", "5e-06"}, {"num_modality", "1"}, {"num_patterns", "1"}, {"out_dtype", "bf16"}};
    EXPECT_EQ(st::File::open(out).metadata(), want);
}

TEST(CliOptions, MissingOutDtypeMeansInputDtype) {
    cli_test::TempDir dir;
    const st::File golden = st::File::open(cli_test::golden_path("plain_f16_d64"));
    std::map<std::string, std::string> metadata = golden.metadata();
    metadata["out_dtype"] = "none";
    const std::string in = dir.file("in.safetensors"), out = dir.file("out.safetensors");
    st::write(in, cli_test::tensors_of(golden), metadata);

    const cli_test::ProcessResult run = cli_test::run_cli({"apply", in, out, "--threads", "1"}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    const st::File result = st::File::open(out);
    EXPECT_TRUE(ref::gate3_within_local_ulp(result.view("y"), golden.view("y")));
    EXPECT_EQ(result.metadata().at("out_dtype"), "f16");
}

TEST(CliOptions, GroupSizesMayBeI64) {
    cli_test::TempDir dir;
    const st::File golden = st::File::open(cli_test::golden_path("groups_m3_sizes"));
    std::vector<st::OutputTensor> tensors = cli_test::tensors_of(golden);
    std::vector<std::int64_t> sizes;
    for (st::OutputTensor &t : tensors) {
        if (t.name != "group_sizes") continue;
        const auto *i32 = static_cast<const std::int32_t *>(t.data);
        sizes.assign(i32, i32 + t.shape[0]);
        t = {t.name, "I64", t.shape, sizes.data()};
    }
    ASSERT_EQ(sizes.size(), 3u);
    const std::string in = dir.file("in.safetensors"), out = dir.file("out.safetensors");
    st::write(in, tensors, golden.metadata());

    const cli_test::ProcessResult run = cli_test::run_cli({"apply", in, out}, dir);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    const st::File result = st::File::open(out);
    EXPECT_TRUE(ref::gate1_close(result.view("y_f32"), golden.view("y_f32")));
    EXPECT_TRUE(ref::gate3_within_local_ulp(result.view("y"), golden.view("y")));
}

}  // namespace
