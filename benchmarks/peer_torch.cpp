// PyTorch on the CPU through libtorch (ATen), on the workspace's own input memory, in inference
// mode, with as many intra-op threads as the library uses. Two variants of the model's norm:
//   formula:  x.float(); x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps); * (w + 1); .to(out)
//   rms_norm: rms_norm(x.float(), [D], eps) without weight; * (w + 1); .to(out)
// With three modalities each group is scaled by its own (w[m] + 1) and the parts concatenated;
// per-token ids first gather the tokens into modality order and scatter the result back, as
// the model's dispatcher does (the permutation itself is computed once, outside the timing).
// Outputs are new tensors, as in the model, not written into the workspace.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

at::ScalarType scalar_type(DType dtype) {
    switch (dtype) {
    case DType::bf16: return at::kBFloat16;
    case DType::f16: return at::kHalf;
    default: return at::kFloat;
    }
}

at::Tensor index_tensor(const std::vector<std::int64_t> &values) {
    return at::tensor(at::ArrayRef<std::int64_t>(values), at::kLong);
}

class TorchRunner : public Runner {
public:
    TorchRunner(Workspace &ws, bool use_rms_norm) : ws_(ws), use_rms_norm_(use_rms_norm) {
        const Case &c = ws.spec();
        for (std::size_t p = 0; p < ws.pairs(); ++p) {
            inputs_.push_back(at::from_blob(const_cast<void *>(ws.x(p)), c.shape(), scalar_type(c.in)));
        }
        weight_ = at::from_blob(const_cast<std::uint16_t *>(ws.weight().data()), {c.num_modality, c.dim()}, at::kBFloat16);
        if (c.grouping == GroupingKind::ids) {
            const ModalityDispatcher dispatcher(ws.token_ids().data(), c.tokens, c.num_modality);
            permutation_ = index_tensor(dispatcher.permutation());
            inverse_ = index_tensor(dispatcher.inverse_permutation());
        }
    }

    const void *run(std::size_t pair) override {
        c10::InferenceMode inference;
        const Case &c = ws_.spec();
        at::Tensor x = inputs_[pair];
        if (permutation_.defined()) x = x.index_select(0, permutation_);
        x = x.to(at::kFloat);
        const at::Tensor normalized = use_rms_norm_ ? at::rms_norm(x, {c.dim()}, std::nullopt, static_cast<double>(kEps))
                                                    : x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + kEps);
        at::Tensor y;
        if (c.num_modality == 1) {
            y = (normalized * (weight_[0] + 1)).to(scalar_type(c.out));
        } else {
            std::vector<at::Tensor> parts;
            std::int64_t start = 0;
            for (std::size_t m = 0; m < ws_.group_sizes().size(); ++m) {
                const std::int64_t size = ws_.group_sizes()[m];
                const at::Tensor scale = weight_[static_cast<std::int64_t>(m)] + 1;
                parts.push_back((normalized.narrow(0, start, size) * scale).to(scalar_type(c.out)));
                start += size;
            }
            y = at::cat(parts);
        }
        if (inverse_.defined()) y = y.index_select(0, inverse_);
        output_ = y;
        return output_.data_ptr();
    }

private:
    Workspace &ws_;
    bool use_rms_norm_;
    std::vector<at::Tensor> inputs_;
    at::Tensor weight_, permutation_, inverse_, output_;
};

Implementation torch_peer(const char *name, bool use_rms_norm) {
    return {name, num_threads(), [](const Case &) { return true; },
            [use_rms_norm](Workspace &ws) { return std::make_unique<TorchRunner>(ws, use_rms_norm); }};
}

}  // namespace

std::vector<Implementation> torch_peers(std::string &) {
    at::set_num_threads(num_threads());
    return {torch_peer("torch_formula", false), torch_peer("torch_rms_norm", true)};
}

}  // namespace magi2norm::bench
