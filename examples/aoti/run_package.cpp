// A C++ serving host for a model exported with magi2norm's ops: it loads the ops' library (which
// registers magi2norm::* with torch's dispatcher), then an AOTInductor package, and runs it on
// inputs read from raw files, writing each output's raw bytes. No Python in the process.
//
//   run_package MODEL.pt2 libmagi2norm_torch.so TOKENS X.bin IDS.bin OUT_PREFIX
//   (x: bfloat16 [TOKENS, width], ids: int32 [TOKENS]; width from the package's first input)
#include <dlfcn.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

namespace {

std::vector<char> read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

torch::Tensor tensor_from(const std::string &path, std::vector<std::int64_t> shape, torch::Dtype dtype) {
    std::vector<char> bytes = read_file(path);
    torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
    if (bytes.size() != t.nbytes()) throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(t.nbytes()));
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    return t;
}

}  // namespace

int main(int argc, char **argv) try {
    if (argc != 7) {
        std::cerr << "usage: run_package MODEL.pt2 LIBRARY.so TOKENS X.bin IDS.bin OUT_PREFIX\n";
        return 2;
    }
    if (dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
        std::cerr << "cannot load " << argv[2] << ": " << dlerror() << "\n";
        return 1;
    }
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    const std::int64_t tokens = std::stoll(argv[3]);
    const std::int64_t width = static_cast<std::int64_t>(read_file(argv[4]).size()) / 2 / tokens;
    std::vector<torch::Tensor> inputs{tensor_from(argv[4], {tokens, width}, torch::kBFloat16),
                                      tensor_from(argv[5], {tokens}, torch::kInt32)};
    const std::vector<torch::Tensor> outputs = loader.run(inputs);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const torch::Tensor out = outputs[i].contiguous();
        std::ofstream(std::string(argv[6]) + std::to_string(i) + ".bin", std::ios::binary)
            .write(static_cast<const char *>(out.data_ptr()), static_cast<std::streamsize>(out.nbytes()));
    }
    std::cout << outputs.size() << " outputs\n";
    return 0;
} catch (const std::exception &e) {
    std::cerr << e.what() << "\n";
    return 1;
}
