#include "cli_support.hpp"

namespace cli_test {

Process start_cli(const std::vector<std::string> &args, const TempDir &dir, const std::vector<std::string> &env) {
    std::vector<std::string> argv{MAGI2NORM_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    return start_process(argv, dir.path().string(), env);
}

ProcessResult run_cli(const std::vector<std::string> &args, const TempDir &dir) { return wait_process(start_cli(args, dir, {})); }

std::vector<magi2norm::safetensors::OutputTensor> tensors_of(const magi2norm::safetensors::File &file) {
    std::vector<magi2norm::safetensors::OutputTensor> tensors;
    for (const std::string &name : file.names()) {
        const magi2norm::safetensors::TensorInfo &t = file.tensor(name);
        tensors.push_back({t.name, t.dtype, t.shape, t.data});
    }
    return tensors;
}

}  // namespace cli_test
