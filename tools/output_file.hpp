// An output file that appears whole or not at all. It is written to a temporary file in the
// folder of its path (through symlinks: beside the file they name), flushed to disk and renamed
// over the path only when complete. An error, or SIGINT or SIGTERM while one is open, removes the
// temporary file, and whatever the path held before stays as it was.
//
// Test hook: MAGI2NORM_TEST_WRITE_DELAY_MS=<ms> sleeps that long after each MiB written, so a
// test can signal the process in the middle of a large write (tests/cli/cli_output_test.cpp).
#pragma once

#include <csignal>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "magi2norm/safetensors.hpp"

namespace magi2norm::cli {

class OutputFile {
public:
    // Creates the temporary file; Error(io) when it cannot.
    explicit OutputFile(const std::string &path);
    // Removes the temporary file unless committed.
    ~OutputFile();
    OutputFile(const OutputFile &) = delete;
    OutputFile &operator=(const OutputFile &) = delete;

    void write(const void *data, std::size_t size);
    // Flushes to disk and renames into place.
    void commit();

private:
    void discard();

    std::string path_, target_, temp_;
    int fd_ = -1;
    struct sigaction old_int_ {}, old_term_ {};
};

// A safetensors file (safetensors::encode's bytes) written through an OutputFile.
void write_output_file(const std::string &path, const std::vector<safetensors::OutputTensor> &tensors,
                       const std::map<std::string, std::string> &metadata);

}  // namespace magi2norm::cli
