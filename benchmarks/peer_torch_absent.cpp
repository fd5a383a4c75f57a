// Built instead of peer_torch.cpp when CMake found no libtorch: the PyTorch peers are simply
// not registered, and the binary says so.
#include "implementation.hpp"

namespace magi2norm::bench {

std::vector<Implementation> torch_peers(std::string &why) {
    why = "PyTorch peers not registered: built without libtorch (scripts/bench.sh --with-torch installs it)";
    return {};
}

}  // namespace magi2norm::bench
