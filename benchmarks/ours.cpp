// The library through its public API, exactly as a host calls it: one RMSNorm made from the BF16
// weight, forward() per call (views and grouping validated every time, as in the model), or a
// plan made once and run per call ("ours_planned": what a host that repeats its shapes does).
// Also the same memory through other views (ViewForm), which should run at the plain view's speed.
#include "implementation.hpp"

#include <utility>

namespace magi2norm::bench {

namespace {

Grouping grouping_of(const Workspace &ws) {
    switch (ws.spec().grouping) {
    case GroupingKind::sizes: return Grouping::sizes(ws.group_sizes());
    case GroupingKind::ids: return Grouping::ids(ws.token_ids().data(), ws.spec().tokens);
    default: return Grouping::none();
    }
}

// How the workspace's dense [T, rows..., D] memory is handed to forward().
enum class ViewForm {
    plain,         // [T, rows..., D]
    one_sequence,  // [1, T, rows..., D]: a host's [batch, sequence, hidden] with one sequence
    heads_major,   // [rows, T, D] of [T, rows, D] memory: the heads axis first, as after a transpose
};

class OursRunner : public Runner {
public:
    OursRunner(Workspace &ws, ViewForm form)
        : ws_(ws),
          norm_(config(ws.spec()), ConstTensorView(ws.weight().data(), DType::bf16,
                                                   {static_cast<std::int64_t>(ws.weight().size())})),
          grouping_(grouping_of(ws)),
          shape_(ws.spec().shape()),
          strides_(contiguous_strides(shape_)) {
        if (form == ViewForm::one_sequence) {
            shape_.insert(shape_.begin(), 1);
            strides_.insert(strides_.begin(), strides_.front() * ws.spec().tokens);
        } else if (form == ViewForm::heads_major) {
            std::swap(shape_[0], shape_[1]);
            std::swap(strides_[0], strides_[1]);
        }
    }

    const void *run(std::size_t pair) override {
        const Case &c = ws_.spec();
        norm_.forward(ConstTensorView(ws_.x(pair), c.in, shape_, strides_), grouping_,
                      TensorView(ws_.out(pair), c.out, shape_, strides_));
        return ws_.out(pair);
    }

protected:
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
    std::vector<std::int64_t> shape_, strides_;
};

class PlannedRunner : public OursRunner {
public:
    explicit PlannedRunner(Workspace &ws)
        : OursRunner(ws, ViewForm::plain),
          plan_(norm_.plan(ConstTensorView(nullptr, ws.spec().in, shape_, strides_), grouping_,
                           TensorView(nullptr, ws.spec().out, shape_, strides_))),
          ids_(grouping_.token_ids()) {}

    const void *run(std::size_t pair) override {
        plan_.run(ws_.x(pair), ws_.out(pair), ids_);
        return ws_.out(pair);
    }

private:
    Plan plan_;
    const std::int32_t *ids_;
};

}  // namespace

Implementation ours() {
    Implementation impl{"ours", num_threads(), [](const Case &) { return true; },
                        [](Workspace &ws) { return std::make_unique<OursRunner>(ws, ViewForm::plain); }};
    impl.nearby_ceilings = true;
    return impl;
}

Implementation ours_planned() {
    // The tiny calls only, where the checks a plan saves are a visible part of a call.
    Implementation impl{"ours_planned", num_threads(), [](const Case &c) { return c.tokens <= kTinyTokens; },
                        [](Workspace &ws) { return std::make_unique<PlannedRunner>(ws); }};
    impl.nearby_ceilings = true;
    return impl;
}

std::vector<Implementation> ours_view_forms() {
    // One modality only: with more, axis 0 of these views is not the tokens' modality order the
    // workspace's grouping and check describe. The large calls only (T >= kLargeTokens, which
    // comes from memory except for the narrowest rows), where a view could cost bandwidth.
    const auto large_one_modality = [](const Case &c) { return c.num_modality == 1 && c.tokens >= kLargeTokens; };
    const auto prepare = [](ViewForm form) {
        return [form](Workspace &ws) { return std::make_unique<OursRunner>(ws, form); };
    };
    return {{"ours_one_sequence", num_threads(), large_one_modality, prepare(ViewForm::one_sequence)},
            {"ours_heads_major", num_threads(),
             [=](const Case &c) { return large_one_modality(c) && c.rows_per_token() > 1; }, prepare(ViewForm::heads_major)}};
}

}  // namespace magi2norm::bench
