// The backward's peers, measured beside the library in benchmarks/backward.cpp: Halide's own
// autodiff of the forward formula under an autoscheduler (backward_peer_autodiff.cpp), and
// PyTorch autograd of the model's formula (peer_torch_backward.cpp, with libtorch only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::bench {

// One backward case: x, dy and dx of `shape` ([T, D] or [T, rows, D]), tokens in modality order,
// `sizes[m]` tokens of modality m; the weight gradient is M*D FP32 values.
struct BackwardProblem {
    std::string norm;
    DType x, dy, dx;
    std::vector<std::int64_t> shape;
    std::int64_t tokens = 0, rows = 1, dim = 0;
    std::vector<std::int64_t> sizes;

    std::int64_t modalities() const { return static_cast<std::int64_t>(sizes.size()); }
};

// One set of the case's buffers: the peer reads x and dy, and may write dx (or return its own).
struct BackwardBuffers {
    const void *x;
    const void *dy;
    void *dx;
};

class BackwardRunner {
public:
    virtual ~BackwardRunner() = default;
    struct Result {
        const void *dx;        // in the problem's dx dtype and shape
        const float *dweight;  // M*D, modality-major
    };
    // The gradients for buffer set `set`, valid until the next call.
    virtual Result run(std::size_t set) = 0;
};

struct BackwardPeer {
    std::string name;  // the counters' prefix in the backward benchmarks
    std::function<bool(const BackwardProblem &)> supports;
    // Prepared once per benchmark run on the case's buffer sets, for the norm of weight `weight`
    // (M*D FP32; the scale is weight + 1).
    std::function<std::unique_ptr<BackwardRunner>(const BackwardProblem &, const std::vector<BackwardBuffers> &,
                                                  const std::vector<float> &weight)>
        prepare;
};

// Halide::propagate_adjoints of the forward formula, one peer per autoscheduler built
// (MAGI2NORM_BACKWARD_AUTOSCHEDULERS): "autodiff_li2018", ...
std::vector<BackwardPeer> halide_autodiff_peers();
// PyTorch autograd ("torch_autograd"); empty, with `why` saying so, without libtorch.
std::vector<BackwardPeer> torch_autograd_peers(std::string &why);

}  // namespace magi2norm::bench
