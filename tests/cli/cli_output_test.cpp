// Nothing lost on disk: `apply` writes OUT whole or not at all. A run killed by SIGTERM or SIGINT
// in the middle of a large write, or one that fails, leaves an existing OUT as it was and no
// temporary file; OUT naming IN (a hard link, another spelling) is refused.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cli_support.hpp"

namespace fs = std::filesystem;
namespace st = magi2norm::safetensors;

namespace {

constexpr std::int64_t kTokens = 4096, kDim = 512;  // x 8 MiB of F32, OUT 16 MiB (y and y_f32)
const std::string kOldOut = "the output of an earlier run";

class CliOutput : public testing::Test {
protected:
    void SetUp() override {
        fs::create_directory(out_dir_);
        std::vector<float> x(kTokens * kDim), weight(kDim, 0.25f);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) - 48.0f;
        st::write(in_, {{"x", "F32", {kTokens, kDim}, x.data()}, {"weight", "F32", {kDim}, weight.data()}});
        cli_test::write_file(out_, kOldOut);
    }

    // What the output folder holds besides OUT: a temporary file left behind, if any.
    std::vector<std::string> strays() const {
        std::vector<std::string> names;
        for (const auto &entry : fs::directory_iterator(out_dir_)) {
            if (entry.path() != out_) names.push_back(entry.path().filename().string());
        }
        return names;
    }

    // Starts a run that sleeps 50 ms after each MiB it writes (the tool's test hook), waits until
    // its temporary file holds some MiB, and sends `signal`.
    void expect_killed_mid_write(int signal) {
        const cli_test::Process run = cli_test::start_cli({"apply", in_, out_}, dir_, {"MAGI2NORM_TEST_WRITE_DELAY_MS=50"});
        bool mid_write = false;
        for (int polls = 0; polls < 6000 && !mid_write; ++polls) {  // up to 60 s (a sanitizer build)
            for (const std::string &name : strays()) {
                std::error_code error;
                mid_write |= fs::file_size(out_dir_ / name, error) >= (3u << 20) && !error;
            }
            if (!mid_write) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        ASSERT_TRUE(mid_write) << "no temporary file grew to 3 MiB";
        ASSERT_EQ(::kill(run.pid, signal), 0);
        const cli_test::ProcessResult result = cli_test::wait_process(run);
        EXPECT_TRUE(!result.exited && result.status == signal) << cli_test::describe(result);
        EXPECT_EQ(cli_test::read_file(out_), kOldOut) << "OUT changed";
        EXPECT_EQ(strays(), std::vector<std::string>{}) << "a temporary file was left";
    }

    cli_test::TempDir dir_;
    const fs::path out_dir_ = dir_.path() / "out";
    const std::string in_ = dir_.file("in.safetensors"), out_ = (out_dir_ / "out.safetensors").string();
};

TEST_F(CliOutput, SigtermMidWriteLeavesTheOldOutputAndNoTemporaryFile) { expect_killed_mid_write(SIGTERM); }

TEST_F(CliOutput, SigintMidWriteLeavesTheOldOutputAndNoTemporaryFile) { expect_killed_mid_write(SIGINT); }

// The same run, not interrupted, replaces OUT with the whole result.
TEST_F(CliOutput, ACompleteRunReplacesTheOutput) {
    const cli_test::ProcessResult run = cli_test::run_cli({"apply", in_, out_}, dir_);
    ASSERT_TRUE(run.exited && run.status == 0) << cli_test::describe(run);
    const st::File out = st::File::open(out_);
    EXPECT_EQ(out.tensor("y").shape, (std::vector<std::int64_t>{kTokens, kDim}));
    EXPECT_EQ(out.tensor("y_f32").nbytes, static_cast<std::size_t>(kTokens * kDim * 4));
    EXPECT_EQ(strays(), std::vector<std::string>{});
}

// A run that fails after reading IN (here: a weight of the wrong size) leaves OUT as it was.
TEST_F(CliOutput, AFailedRunLeavesTheOldOutput) {
    const cli_test::ProcessResult run = cli_test::run_cli({"apply", in_, out_, "--num-modality", "2"}, dir_);
    EXPECT_TRUE(run.exited && run.status == 1) << cli_test::describe(run);
    EXPECT_EQ(cli_test::read_file(out_), kOldOut);
    EXPECT_EQ(strays(), std::vector<std::string>{});
}

// A folder that cannot take the temporary file: an io error naming OUT, nothing written.
TEST_F(CliOutput, AnUnwritableFolderIsAnIoError) {
    const std::string out = (out_dir_ / "missing" / "out.safetensors").string();
    const cli_test::ProcessResult run = cli_test::run_cli({"apply", in_, out}, dir_);
    EXPECT_TRUE(run.exited && run.status == 1) << cli_test::describe(run);
    EXPECT_NE(run.err.find("magi2-norm: error: io: " + out + ": cannot create"), std::string::npos) << run.err;
    EXPECT_EQ(strays(), std::vector<std::string>{});
}

// OUT = IN by device and inode, whatever the path: a hard link, "./", "dir/../".
TEST_F(CliOutput, OutNamingInIsRefusedWhateverThePath) {
    const std::string in_bytes = cli_test::read_file(in_), link = dir_.file("hard_link.safetensors");
    fs::create_hard_link(in_, link);
    const std::string spelled = (out_dir_ / ".." / "." / "in.safetensors").string();
    for (const std::string &out : {link, spelled}) {
        const cli_test::ProcessResult run = cli_test::run_cli({"apply", in_, out}, dir_);
        EXPECT_TRUE(run.exited && run.status == 2) << out << ": " << cli_test::describe(run);
        EXPECT_NE(run.err.find("OUT is the same file as IN"), std::string::npos) << run.err;
        EXPECT_EQ(cli_test::read_file(in_), in_bytes) << "IN changed";
    }
}

}  // namespace
