// Scratch files for the tests: a temporary directory removed with its contents, whole-file
// reads and writes, hand-made safetensors bytes for the malformation tests, and the golden files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cli_test {

class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;

    const std::filesystem::path &path() const { return path_; }
    // path() / name, as a string.
    std::string file(const std::string &name) const;

private:
    std::filesystem::path path_;
};

void write_file(const std::string &path, const std::string &bytes);
std::string read_file(const std::string &path);

// An 8-byte little-endian header length, the header text, then the data: a safetensors file
// when the header is right, any malformation the test wants otherwise.
std::string safetensors_bytes(const std::string &header, const std::string &data = "");
std::string safetensors_bytes(std::uint64_t declared_header_length, const std::string &header, const std::string &data);

// Golden file stems ("plain_bf16_d64", ...) in MAGI2NORM_GOLDEN_DIR, sorted; empty when the
// folder is missing.
std::vector<std::string> golden_names();
std::string golden_path(const std::string &name);

}  // namespace cli_test
