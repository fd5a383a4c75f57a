// The CLI's `apply` (run_cli, as magi2-norm runs it) on a fuzzed file and fuzzed flags. The input
// is the flags (text up to the first NUL byte, split at spaces) then the file's bytes. Every run
// ends with status 0, 1 or 2; one that fails leaves the existing OUT as it was, one that
// succeeds leaves a readable OUT with y and y_f32; none leaves a temporary file behind.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "cli.hpp"
#include "fuzz_input.hpp"
#include "magi2norm/safetensors.hpp"

namespace {

namespace fs = std::filesystem;

const std::string kOldOut = "the output of an earlier run";

void write_file(const fs::path &path, const std::string &bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string read_file(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    const std::string bytes(reinterpret_cast<const char *>(data), size);
    const std::size_t split = std::min(bytes.find('\0'), bytes.size());
    const fs::path &dir = fuzz::scratch_dir();
    const fs::path in = dir / "in.safetensors", out = dir / "out.safetensors";
    write_file(in, split < bytes.size() ? bytes.substr(split + 1) : std::string());
    write_file(out, kOldOut);

    std::vector<std::string> args{"apply", in.string(), out.string()};
    std::istringstream flags(bytes.substr(0, split));
    bool help = false;
    for (std::string flag; flags >> flag;) {
        help |= flag == "--help" || flag == "-h";
        args.push_back(flag);
    }
    const int status = magi2norm::cli::run_cli(args);

    if (status < 0 || status > 2) fuzz::finding("exit status " + std::to_string(status));
    if (status != 0 || help) {
        if (read_file(out) != kOldOut) fuzz::finding("a run that wrote nothing changed OUT");
    } else {
        const magi2norm::safetensors::File result = magi2norm::safetensors::File::open(out.string());
        if (!result.contains("y") || !result.contains("y_f32")) fuzz::finding("OUT lacks y or y_f32");
    }
    for (const auto &entry : fs::directory_iterator(dir)) {
        if (entry.path() != in && entry.path() != out) fuzz::finding("left behind: " + entry.path().string());
    }
    return 0;
}
