#include "test_files.hpp"

#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace cli_test {

TempDir::TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "magi2norm-cli-XXXXXX").string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = buffer.data();
}

TempDir::~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::file(const std::string &name) const { return (path_ / name).string(); }

void write_file(const std::string &path, const std::string &bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string safetensors_bytes(std::uint64_t declared_header_length, const std::string &header, const std::string &data) {
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(declared_header_length >> (8 * i)));
    return bytes + header + data;
}

std::string safetensors_bytes(const std::string &header, const std::string &data) {
    return safetensors_bytes(header.size(), header, data);
}

std::vector<std::string> golden_names() {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto &entry : std::filesystem::directory_iterator(MAGI2NORM_GOLDEN_DIR, error)) {
        if (entry.path().extension() == ".safetensors") names.push_back(entry.path().stem().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string golden_path(const std::string &name) {
    return (std::filesystem::path(MAGI2NORM_GOLDEN_DIR) / (name + ".safetensors")).string();
}

}  // namespace cli_test
