#include "cli_support.hpp"

namespace cli_test {

ProcessResult run_cli(const std::vector<std::string> &args, const TempDir &dir) {
    std::vector<std::string> argv{MAGI2NORM_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, dir.path().string());
}

std::vector<magi2norm::safetensors::OutputTensor> tensors_of(const magi2norm::safetensors::File &file) {
    std::vector<magi2norm::safetensors::OutputTensor> tensors;
    for (const std::string &name : file.names()) {
        const magi2norm::safetensors::TensorInfo &t = file.tensor(name);
        tensors.push_back({t.name, t.dtype, t.shape, t.data});
    }
    return tensors;
}

}  // namespace cli_test
