// Built instead of peer_torch.cpp and peer_torch_backward.cpp when CMake found no libtorch: the
// PyTorch peers (the forward's and the backward's) are simply not registered, and the binary
// says so.
#include "backward_peers.hpp"
#include "implementation.hpp"

namespace magi2norm::bench {

std::vector<Implementation> torch_peers(std::string &why) {
    why = "PyTorch peers not registered: built without libtorch (scripts/bench.sh --with-torch installs it)";
    return {};
}

std::vector<BackwardPeer> torch_autograd_peers(std::string &why) {
    why = "PyTorch autograd peer not registered: built without libtorch (scripts/bench.sh --with-torch installs it)";
    return {};
}

}  // namespace magi2norm::bench
