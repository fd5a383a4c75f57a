// The fuzz targets' view of their input: small numbers taken from the front of the bytes, zeros
// once they run out, so every input decodes to some call and a few bytes change one choice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace fuzz {

class Input {
public:
    Input(const std::uint8_t *data, std::size_t size) : data_(data), size_(size) {}

    std::uint8_t byte() {
        if (size_ == 0) return 0;
        --size_;
        return *data_++;
    }
    // An integer in [lo, hi] (hi - lo < 2^16).
    std::int64_t in(std::int64_t lo, std::int64_t hi) {
        const unsigned value = byte() | (unsigned{byte()} << 8);
        return lo + static_cast<std::int64_t>(value % static_cast<unsigned>(hi - lo + 1));
    }
    bool flag() { return byte() & 1; }
    // The bytes not taken yet.
    std::string rest() {
        std::string bytes(reinterpret_cast<const char *>(data_), size_);
        size_ = 0;
        return bytes;
    }

private:
    const std::uint8_t *data_;
    std::size_t size_;
};

// A property the target checks did not hold: a finding, reported as a crash.
[[noreturn]] inline void finding(const std::string &what) {
    std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
    std::abort();
}

// This process's scratch folder for the files a target writes, removed when the process ends.
inline const std::filesystem::path &scratch_dir() {
    struct Folder {
        std::filesystem::path path = std::filesystem::temp_directory_path() / ("magi2norm-fuzz-" + std::to_string(::getpid()));
        Folder() { std::filesystem::create_directories(path); }
        ~Folder() {
            std::error_code error;
            std::filesystem::remove_all(path, error);
        }
    };
    static const Folder folder;
    return folder.path;
}

}  // namespace fuzz
