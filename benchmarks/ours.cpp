// The library through its public API, exactly as a host calls it: one RMSNorm made from the BF16
// weight, forward() per call (views and grouping validated every time, as in the model), or a
// plan made once and run per call ("ours_planned": what a host that repeats its shapes does).
// Also the same memory through other views (ViewForm), which should run at the plain view's speed,
// the output at each address alignment ("ours_out_at_<bytes>"), with ordinary stores forced
// ("ours_ordinary_stores"), and, on a CPU with AVX-512 BF16, the variant its plan would run
// without that ISA's family ("ours_integer_bf16").
#include "implementation.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "magi2norm/internal.hpp"

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
        for (std::size_t pair = 0; pair < ws.pairs(); ++pair) outputs_.push_back(ws.out(pair));
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
                      TensorView(outputs_[pair], c.out, shape_, strides_), options_);
        return outputs_[pair];
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
    std::vector<void *> outputs_;  // one a pair: the workspace's, unless a subclass places them
    CallOptions options_;
};

// The plain view with streaming stores refused (a per-call StreamingPolicy of 0 bytes), as a host
// that forces ordinary stores runs, and as outputs below the streaming threshold do.
class OrdinaryStoresRunner : public OursRunner {
public:
    explicit OrdinaryStoresRunner(Workspace &ws) : OursRunner(ws, ViewForm::plain) { options_.streaming = StreamingPolicy{0, 0, 0}; }
};

// The plain view with its output at an address of exactly `alignment` bytes (64-byte aligned
// plus `alignment`, or plus 0 for 64): the output buffers are the runner's own, one per pair,
// so that only the output's address differs from "ours" (whose workspace buffers are 64-byte
// aligned), as in a host whose output lives in a std::vector, a NumPy array or a view at an offset.
class OutputAtRunner : public OursRunner {
public:
    OutputAtRunner(Workspace &ws, std::size_t alignment) : OursRunner(ws, ViewForm::plain) {
        const std::size_t bytes = static_cast<std::size_t>(ws.spec().elements()) * dtype_size(ws.spec().out);
        for (std::size_t pair = 0; pair < ws.pairs(); ++pair) {
            buffers_.emplace_back(bytes + 128);
            auto base = reinterpret_cast<std::uintptr_t>(buffers_.back().data());
            outputs_[pair] = reinterpret_cast<void *>((base + 63) / 64 * 64 + alignment % 64);
        }
    }

private:
    std::vector<std::vector<unsigned char>> buffers_;
};

class PlannedRunner : public OursRunner {
public:
    const Plan &plan() const { return plan_; }

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

// The planned call through the variant the plan would choose without the AVX-512 BF16 family:
// the paired-word form where the pointers allow it, else the element form, in the stores the
// library chose; both with the integer BF16 encoder.
class IntegerBf16Runner : public PlannedRunner {
public:
    explicit IntegerBf16Runner(Workspace &ws) : PlannedRunner(ws), call_(detail::call_plan_of(plan())) {
        const std::string in = dtype_name(ws.spec().in);
        for (int stores = 0; stores < 2; ++stores) {
            elements_[stores] = detail::kernel_named("magi2_norm_cpu_" + std::string(stores ? "streaming_" : "") + in + "_bf16");
        }
    }

    const void *run(std::size_t pair) override {
        const void *x = ws_.x(pair);
        void *out = ws_.out(pair);
        const int stores = detail::choose_kernel(call_, x, out).streaming_alignment > 0 ? 1 : 0;
        const detail::KernelEntry *paired = call_.paired_words[static_cast<std::size_t>(stores)];
        const bool words = paired != nullptr && detail::aligned(x, 4) && detail::aligned(out, 4);
        detail::run_call(call_, words ? paired : elements_[stores], x, out, grouping_.token_ids());
        return out;
    }

private:
    const detail::CallPlan &call_;
    const detail::KernelEntry *elements_[2] = {};
};

// The planned call as a build without the tuning record runs it: each of the plan's variants
// that is a class variant replaced by the untuned variant of its kind, then the library's own
// choice among them. Beside "ours" in one process, the ratio of the two is the record's gain.
class UntunedRunner : public PlannedRunner {
public:
    explicit UntunedRunner(Workspace &ws) : PlannedRunner(ws), call_(detail::call_plan_of(plan())) {
        const auto untuned = [](const detail::KernelEntry *&k) {
            if (k != nullptr && k->tuning_class > 0) {
                k = detail::untuned_kernel(k->backend, k->in, k->out, k->form, k->streaming_alignment > 0, k->compute_capability, k->dx);
            }
        };
        for (auto *slots : {&call_.elements, &call_.paired_words}) {
            for (const detail::KernelEntry *&k : *slots) untuned(k);
        }
        untuned(call_.one_row);
    }

    const void *run(std::size_t pair) override {
        const void *x = ws_.x(pair);
        void *out = ws_.out(pair);
        detail::run_call(call_, &detail::choose_kernel(call_, x, out), x, out, grouping_.token_ids());
        return out;
    }

private:
    detail::CallPlan call_;
};

// Whether a call of `c` falls in a class of this build's tuning record that this CPU runs (its
// dtype pair, D and bytes).
bool in_a_class(const Case &c) {
    const std::int64_t bytes = c.elements() * static_cast<std::int64_t>(dtype_size(c.in) + dtype_size(c.out));
    const auto serves = [&](const detail::KernelEntry *k) {
        return detail::serves_class(*k, Backend::cpu, c.in, c.out, k->form, k->streaming_alignment > 0, {c.dim(), bytes});
    };
    const std::vector<const detail::KernelEntry *> classes = detail::class_kernels();
    return std::any_of(classes.begin(), classes.end(), serves);
}

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

Implementation ours_integer_bf16() {
    // BF16 outputs of the model's shapes (T >= 16), where the library takes its AVX-512 BF16 family.
    const auto native = [](const Case &c) {
        return c.out == DType::bf16 && c.tokens >= kTinyTokens && detail::cpu_runs(detail::Isa::avx512_bf16);
    };
    Implementation impl{"ours_integer_bf16", num_threads(), native,
                        [](Workspace &ws) { return std::make_unique<IntegerBf16Runner>(ws); }};
    impl.nearby_ceilings = true;
    return impl;
}

Implementation ours_untuned() {
    Implementation impl{"ours_untuned", num_threads(), in_a_class, [](Workspace &ws) { return std::make_unique<UntunedRunner>(ws); }};
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
    std::vector<Implementation> forms = {
        {"ours_one_sequence", num_threads(), large_one_modality, prepare(ViewForm::one_sequence)},
        {"ours_heads_major", num_threads(), [=](const Case &c) { return large_one_modality(c) && c.rows_per_token() > 1; },
         prepare(ViewForm::heads_major)},
        {"ours_ordinary_stores", num_threads(), large_one_modality,
         [](Workspace &ws) { return std::make_unique<OrdinaryStoresRunner>(ws); }}};
    // The output at each alignment its dtype allows, 64 bytes included (the runner's buffers
    // against the workspace's): "ours_out_at_<bytes>".
    for (std::size_t alignment : {64, 32, 16, 4, 2}) {
        forms.push_back({"ours_out_at_" + std::to_string(alignment), num_threads(),
                         [=](const Case &c) { return large_one_modality(c) && alignment % dtype_size(c.out) == 0; },
                         [alignment](Workspace &ws) { return std::make_unique<OutputAtRunner>(ws, alignment); }});
    }
    return forms;
}

void run_on_library_pool(int threads, int parts, int (*job)(void *context, int part), void *context) {
    if (parts <= 1 || !detail::try_run_on_pool(threads, parts, job, context)) {
        for (int part = 0; part < parts; ++part) job(context, part);
    }
}

}  // namespace magi2norm::bench
