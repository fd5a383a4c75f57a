// A C++ host of the installed magi2norm package: writes a small checkpoint, loads the norms of one
// transformer block from it by key, runs them and prints a checksum of the outputs.
//
//   host_example block.safetensors
#include <cinttypes>
#include <cstdio>
#include <string>

#include "block_norms.hpp"

namespace {

std::string shape_text(const std::vector<std::int64_t> &shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <checkpoint.safetensors to write and load>\n", argv[0]);
        return 2;
    }
    try {
        block_norms::write_checkpoint(argv[1]);
        const std::vector<block_norms::Step> steps = block_norms::run(argv[1]);
        for (const block_norms::Step &step : steps) {
            std::printf("%s%-20s M=%" PRId64 "  x %s %-16s -> y %s %s\n", block_norms::kLayerPrefix.c_str(),
                        step.module.c_str(), step.config.num_modality, magi2norm::dtype_name(step.x.dtype),
                        shape_text(step.x.shape).c_str(), magi2norm::dtype_name(step.y.dtype),
                        shape_text(step.y.shape).c_str());
        }
        std::printf("checksum %016" PRIx64 "\n", block_norms::checksum(steps));
    } catch (const magi2norm::Error &e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
