// The backward's PyTorch peer: autograd of the model's formula through libtorch, eager, on the
// CPU, with as many intra-op threads as the library uses. Per buffer set, the forward
//   xf = x.float(); n = xf * rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
//   y  = cat over modalities m of (n[tokens of m] * (w[m] + 1)).to(dy's dtype)
// is recorded once, untimed (x a leaf in its own dtype over the caller's memory, w an FP32 leaf);
// a call is the backward alone, torch::autograd::grad({y}, {x, w}, {dy}, retain_graph), the
// autograd engine walking that graph for the given dy: dx comes out in x's dtype (the .float()'s
// gradient is cast back), dweight in FP32. New tensors, as in the model, not the caller's dx.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "backward_peers.hpp"

namespace magi2norm::bench {

namespace {

constexpr double kPeerEps = 1e-6;

at::ScalarType scalar_type(DType dtype) {
    switch (dtype) {
    case DType::bf16: return at::kBFloat16;
    case DType::f16: return at::kHalf;
    default: return at::kFloat;
    }
}

class TorchBackwardRunner : public BackwardRunner {
public:
    TorchBackwardRunner(const BackwardProblem &p, const std::vector<BackwardBuffers> &sets, const std::vector<float> &weight) {
        at::AutoGradMode grad_mode(true);
        weight_ = at::from_blob(const_cast<float *>(weight.data()), {p.modalities(), p.dim}, at::kFloat).clone().requires_grad_(true);
        for (const BackwardBuffers &b : sets) {
            at::Tensor x = at::from_blob(const_cast<void *>(b.x), p.shape, scalar_type(p.x)).requires_grad_(true);
            const at::Tensor dy = at::from_blob(const_cast<void *>(b.dy), p.shape, scalar_type(p.dy));
            const at::Tensor xf = x.to(at::kFloat);
            const at::Tensor n = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + kPeerEps);
            at::Tensor y;
            if (p.modalities() == 1) {
                y = (n * (weight_[0] + 1)).to(scalar_type(p.dy));
            } else {
                std::vector<at::Tensor> parts;
                std::int64_t start = 0;
                for (std::int64_t m = 0; m < p.modalities(); ++m) {
                    const std::int64_t size = p.sizes[static_cast<std::size_t>(m)];
                    parts.push_back((n.narrow(0, start, size) * (weight_[m] + 1)).to(scalar_type(p.dy)));
                    start += size;
                }
                y = at::cat(parts);
            }
            x_.push_back(x);
            dy_.push_back(dy);
            y_.push_back(y);
        }
    }

    Result run(std::size_t set) override {
        const torch::autograd::variable_list grads =
            torch::autograd::grad({y_[set]}, {x_[set], weight_}, {dy_[set]}, /*retain_graph=*/true);
        dx_ = grads[0].contiguous();
        dweight_ = grads[1].contiguous();
        return {dx_.data_ptr(), dweight_.data_ptr<float>()};
    }

private:
    at::Tensor weight_, dx_, dweight_;
    std::vector<at::Tensor> x_, dy_, y_;
};

}  // namespace

std::vector<BackwardPeer> torch_autograd_peers(std::string &) {
    at::set_num_threads(num_threads());
    return {{"torch_autograd",
             // autograd gives dx in x's dtype
             [](const BackwardProblem &p) { return p.dx == p.x; },
             [](const BackwardProblem &p, const std::vector<BackwardBuffers> &sets, const std::vector<float> &weight) {
                 return std::unique_ptr<BackwardRunner>(new TorchBackwardRunner(p, sets, weight));
             }}};
}

}  // namespace magi2norm::bench
