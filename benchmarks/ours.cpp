// The library through its public API, exactly as a host calls it: one RMSNorm made from the BF16
// weight, forward() per call (views and grouping validated every time, as in the model).
#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

Grouping grouping_of(const Workspace &ws) {
    switch (ws.spec().grouping) {
    case GroupingKind::sizes: return Grouping::sizes(ws.group_sizes());
    case GroupingKind::ids: return Grouping::ids(ws.token_ids().data(), ws.spec().tokens);
    default: return Grouping::none();
    }
}

class OursRunner : public Runner {
public:
    explicit OursRunner(Workspace &ws)
        : ws_(ws),
          norm_(config(ws.spec()), ConstTensorView(ws.weight().data(), DType::bf16,
                                                   {static_cast<std::int64_t>(ws.weight().size())})),
          grouping_(grouping_of(ws)),
          shape_(ws.spec().shape()) {}

    const void *run(std::size_t pair) override {
        const Case &c = ws_.spec();
        norm_.forward(ConstTensorView(ws_.x(pair), c.in, shape_), grouping_, TensorView(ws_.out(pair), c.out, shape_));
        return ws_.out(pair);
    }

private:
    static NormConfig config(const Case &c) {
        NormConfig config;
        config.dim = c.dim();
        config.eps = kEps;
        config.num_modality = c.num_modality;
        config.out_dtype = c.out;
        return config;
    }

    Workspace &ws_;
    RMSNorm norm_;
    Grouping grouping_;
    std::vector<std::int64_t> shape_;
};

}  // namespace

Implementation ours() {
    Implementation impl{"ours", num_threads(), [](const Case &) { return true; },
                        [](Workspace &ws) { return std::make_unique<OursRunner>(ws); }};
    impl.nearby_ceilings = true;
    return impl;
}

}  // namespace magi2norm::bench
