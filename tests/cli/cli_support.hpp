// What the CLI tests share: the built magi2-norm (its path from CMake), and rewriting a file's tensors to build a malformed or altered input.
#pragma once

#include <string>
#include <vector>

#include "magi2norm/safetensors.hpp"
#include "run_process.hpp"
#include "test_files.hpp"

namespace cli_test {

// Runs magi2-norm with `args`, its output streams kept in `dir`.
ProcessResult run_cli(const std::vector<std::string> &args, const TempDir &dir);
// Starts it so, with `env` ("NAME=value") added to its environment.
Process start_cli(const std::vector<std::string> &args, const TempDir &dir, const std::vector<std::string> &env);

// Every tensor of `file` as writer input, pointing into the file's mapping.
std::vector<magi2norm::safetensors::OutputTensor> tensors_of(const magi2norm::safetensors::File &file);

}  // namespace cli_test
