// The backward on the model's norms (SPEC.md's table, T = 4096, one and three modalities; mHC and
// the final norm also at T = 32768): bytes moved (x and dy read once, dx written once, the partials
// written and read once), their rate, its fraction of the ordinary-store copy measured around the
// case, and the share of the weight gradient's fixed-order sum (add_partials, the runtime's own
// loop, timed on the case's partials) in the pass's time. The backward's peers (backward_peers.hpp:
// Halide's autodiff under an autoscheduler, PyTorch autograd) run on the same buffers in the same
// benchmark, after the library's timed calls, so each case's ratio comes from one run: counters
// <peer>_us, <peer>_bytes_per_second and <peer>_frac_copy (the case's bytes, as the library's, over
// the peer's time) and <peer>_over_ours (the peer's time over the library's: above 1, the library
// is faster). Each peer is checked first, once per case, against the library on random data
// (check_peer); a peer that fails its check is not timed: <peer>_mismatch = 1 and a note on stderr.
// A build from a tuning record with backward classes also times each model norm's backward at the
// tuner's token counts as the build runs it and as the untuned build would, <case>/ours and
// <case>/ours_untuned (the same call with the untuned variant of the kind the library picks), for
// benchmarks/tuning_check.py.
#include "magi2norm/internal.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "aligned_buffer.hpp"
#include "backward_peers.hpp"
#include "copy_ceilings.hpp"
#include "float_codec.hpp"
#include "magi2norm/magi2norm.hpp"
#include "model_norms.hpp"
#include "splitmix64.hpp"
#include "workspace.hpp"

namespace magi2norm::bench {

namespace {

struct BackwardCase {
    std::string norm;
    std::vector<std::int64_t> row_shape;
    DType x, dy, dx;
    std::int64_t tokens, modalities;
    bool even_split = false;  // the tuner's modalities: tokens split evenly (tuning/bench.cpp)
    bool from_inverse_rms = false;  // the forward's inverse RMS passed (training's call), "/inv"

    std::vector<std::int64_t> shape() const {
        std::vector<std::int64_t> s{tokens};
        s.insert(s.end(), row_shape.begin(), row_shape.end());
        return s;
    }
    std::int64_t elements() const { return element_count(shape()); }
    std::int64_t dim() const { return row_shape.back(); }
    std::string name() const {
        return "backward/" + norm + "/" + dtype_name(x) + "_" + dtype_name(dy) + "_" + dtype_name(dx) + "/M" +
               std::to_string(modalities) + (even_split && modalities > 1 ? "_sizes" : "") + "/T" + std::to_string(tokens) +
               (from_inverse_rms ? "/inv" : "");
    }
    // 3/4, 3/16, 1/16 of the tokens for three modalities, as the forward's cases.
    std::vector<std::int64_t> sizes() const {
        if (modalities == 1) return {tokens};
        if (even_split) {
            std::vector<std::int64_t> s;
            for (std::int64_t m = 0; m < modalities; ++m) s.push_back(tokens / modalities + (m < tokens % modalities ? 1 : 0));
            return s;
        }
        return {tokens * 3 / 4, tokens * 3 / 16, tokens - tokens * 3 / 4 - tokens * 3 / 16};
    }
    // The CPU variants' FP32 partials (one scale row a modality: every row of a token adds to it).
    std::int64_t partial_values() const {
        const std::int64_t token_elements = elements() / tokens;
        const std::int64_t block = detail::partial_block_tokens(token_elements / dim());
        std::int64_t blocks = 0;
        for (const std::int64_t s : sizes()) blocks += (s + block - 1) / block;
        return blocks * dim();
    }
    BackwardProblem problem() const {
        return {norm, x, dy, dx, shape(), tokens, elements() / tokens / dim(), dim(), sizes()};
    }
    double bytes_moved() const {
        return static_cast<double>(elements()) * static_cast<double>(dtype_size(x) + dtype_size(dy) + dtype_size(dx)) +
               8.0 * static_cast<double>(partial_values()) + (from_inverse_rms ? 4.0 * static_cast<double>(elements() / dim()) : 0.0);
    }
};

// A model norm's backward (dx in x's dtype, dy in the forward's output dtype) of T tokens.
BackwardCase model_case(const measure::ModelNorm &n, std::int64_t tokens, std::int64_t modalities, bool from_inverse_rms) {
    return {n.name, n.row, n.x, n.out, n.x, tokens, modalities, false, from_inverse_rms};
}

std::vector<BackwardCase> cases() {
    std::vector<BackwardCase> c;
    // Each model norm at T = 4096 (mHC's forward to FP32 and to BF16), with its rows' sums of
    // squares and from the forward's inverse RMS.
    for (const bool inv : {false, true}) {
        for (const measure::ModelNorm &n : measure::model_norms()) {
            for (const std::int64_t m : {1, 3}) {
                if (m == 1 || (n.grouped && n.label() != "mhc_norm/bf16_bf16")) c.push_back(model_case(n, 4096, m, inv));
            }
        }
    }
    // Long sequences, where the partials outgrow what an allocator keeps (25 MB at D = 12288).
    for (const measure::ModelNorm &n : measure::model_norms()) {
        if (n.label() == "mhc_norm/bf16_f32" || n.name == "final_norm") c.push_back(model_case(n, 32768, 1, false));
    }
    return c;
}

// The peers, made once: Halide's autodiff peers, then PyTorch's where libtorch was built in.
const std::vector<BackwardPeer> &peers() {
    static const std::vector<BackwardPeer> all = [] {
        std::vector<BackwardPeer> p = halide_autodiff_peers();
        std::string why;
        for (BackwardPeer &peer : torch_autograd_peers(why)) p.push_back(std::move(peer));
        if (!why.empty()) std::fprintf(stderr, "backward: %s\n", why.c_str());
        return p;
    }();
    return all;
}

float uniform(measure::SplitMix64 &rng, float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(static_cast<double>(rng.next() >> 11) * 0x1.0p-53);
}

// The peer against the library on random x, dy and weight of the case's shapes: every dx within
// one unit in the last place of dx's dtype of the library's (relative 2^(1 - mantissa bits), and
// 1e-4 of the largest |dx| near zeros, where the two cancel differently), every dweight within
// 1e-4 * (1 + the float64 sum over its rows of |dy * n|) of the library's (SPEC.md's B2 scale:
// the peers add in FP32 in their own order). Empty when it passes, else what differs.
std::string check_peer(const BackwardCase &c, const BackwardPeer &peer) {
    const auto count = static_cast<std::size_t>(c.elements());
    const auto d = static_cast<std::size_t>(c.dim());
    const std::size_t rows = count / d;
    measure::AlignedBuffer x(count * dtype_size(c.x)), dy(count * dtype_size(c.dy)), dx_ours(count * dtype_size(c.dx)),
        dx_peer(count * dtype_size(c.dx));
    measure::SplitMix64 rng(0x6d616769 + static_cast<std::uint64_t>(c.modalities));
    for (std::size_t i = 0; i < count; ++i) {
        encode(c.x, x.data(), i, uniform(rng, -2.0f, 2.0f));
        encode(c.dy, dy.data(), i, uniform(rng, -1.0f, 1.0f));
    }
    std::vector<float> weight(static_cast<std::size_t>(c.modalities) * d);
    for (float &w : weight) w = uniform(rng, -0.5f, 0.5f);

    NormConfig config;
    config.dim = c.dim();
    config.num_modality = c.modalities;
    const RMSNorm norm(config, ConstTensorView(weight.data(), DType::f32, {c.modalities * c.dim()}));
    std::vector<float> dweight_ours(weight.size());
    const Grouping grouping = c.modalities == 1 ? Grouping::none() : Grouping::sizes(c.sizes());
    BackwardOptions options;
    options.dx_dtype = c.dx;
    norm.backward(ConstTensorView(x.data(), c.x, c.shape()), ConstTensorView(dy.data(), c.dy, c.shape()), grouping,
                  TensorView(dx_ours.data(), c.dx, c.shape()), TensorView(dweight_ours.data(), DType::f32, {c.modalities * c.dim()}),
                  options);

    const std::unique_ptr<BackwardRunner> runner = peer.prepare(c.problem(), {{x.data(), dy.data(), dx_peer.data()}}, weight);
    const BackwardRunner::Result result = runner->run(0);

    // B2's scale: the float64 sum over each weight element's rows of |dy * n|.
    std::vector<double> bound(weight.size(), 0.0), exact(weight.size(), 0.0);
    const std::size_t rows_per_token = rows / static_cast<std::size_t>(c.tokens);
    std::size_t row = 0;
    const std::vector<std::int64_t> sizes = c.sizes();
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        for (std::size_t r = 0; r < static_cast<std::size_t>(sizes[m]) * rows_per_token; ++r, ++row) {
            double ms = 0;
            for (std::size_t k = 0; k < d; ++k) ms += std::pow(static_cast<double>(decode(c.x, x.data(), row * d + k)), 2);
            const double inv = 1.0 / std::sqrt(static_cast<double>(static_cast<float>(ms / static_cast<double>(d))) + 1e-6);
            for (std::size_t k = 0; k < d; ++k) {
                const double term = static_cast<double>(decode(c.dy, dy.data(), row * d + k)) *
                                    static_cast<double>(decode(c.x, x.data(), row * d + k)) * inv;
                bound[m * d + k] += std::abs(term);
                exact[m * d + k] += term;
            }
        }
    }

    double largest = 0;
    for (std::size_t i = 0; i < count; ++i) largest = std::max(largest, std::abs(static_cast<double>(decode(c.dx, dx_ours.data(), i))));
    const double rtol = std::ldexp(1.0, 1 - mantissa_bits(c.dx)) + 1e-6, atol = 1e-4 * largest;
    std::ostringstream why;
    double worst_dx = 0, worst_dweight = 0;
    std::size_t bad_dx = 0, bad_dweight = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const double a = decode(c.dx, result.dx, i), b = decode(c.dx, dx_ours.data(), i);
        const double err = std::abs(a - b) / (atol + rtol * std::abs(b));
        if (!(err <= 1.0)) {
            if (bad_dx++ == 0) why << "dx[" << i << "] = " << a << ", the library's " << b << "; ";
        }
        worst_dx = std::max(worst_dx, err);
    }
    for (std::size_t i = 0; i < weight.size(); ++i) {
        const double a = result.dweight[i], b = dweight_ours[i];
        const double err = std::abs(a - b) / (1e-4 * (1.0 + bound[i]));
        if (!(err <= 1.0)) {
            if (bad_dweight++ == 0) why << "dweight[" << i << "] = " << a << ", the library's " << b << " (float64 " << exact[i] << "); ";
        }
        worst_dweight = std::max(worst_dweight, err);
    }
    std::fprintf(stderr, "%s/%s: checked against the library: dx at most %.3g of its tolerance (%zu over), dweight %.3g (%zu over)\n",
                 c.name().c_str(), peer.name.c_str(), worst_dx, bad_dx, worst_dweight, bad_dweight);
    if (bad_dx == 0 && bad_dweight == 0) return {};
    why << bad_dx << " dx and " << bad_dweight << " dweight values beyond the tolerance";
    return why.str();
}

// The peer's check, once per case and peer in a process (repetitions reuse it).
const std::string &checked(const BackwardCase &c, const BackwardPeer &peer) {
    static std::map<std::string, std::string> results;
    const std::string key = c.name() + "/" + peer.name;
    auto it = results.find(key);
    if (it == results.end()) it = results.emplace(key, check_peer(c, peer)).first;
    return it->second;
}

// A case's norm and buffer sets (enough to rotate through twice the last-level cache, at most
// four), and its call on set i: as the library runs it, or with `instead` in place of the variant
// it picks.
struct CaseCalls {
    const BackwardCase &c;
    const RMSNorm norm;
    const std::size_t set_bytes, sets;
    std::vector<measure::AlignedBuffer> x, dy, dx;
    std::vector<float> dweight;
    std::vector<std::vector<float>> inverse_rms;  // each set's, from the forward, with from_inverse_rms
    const Grouping grouping;
    BackwardOptions options;

    explicit CaseCalls(const BackwardCase &k)
        : c(k), norm(NormConfig{k.dim(), 1e-6f, k.modalities}),
          set_bytes(static_cast<std::size_t>(k.elements()) * (dtype_size(k.x) + dtype_size(k.dy) + dtype_size(k.dx))),
          sets(std::clamp<std::size_t>(2 * last_level_cache_bytes() / set_bytes + 1, 1, 4)),
          dweight(static_cast<std::size_t>(k.modalities * k.dim())),
          grouping(k.modalities == 1 ? Grouping::none() : Grouping::sizes(k.sizes())) {
        const auto count = static_cast<std::size_t>(c.elements());
        for (std::size_t i = 0; i < sets; ++i) {
            x.emplace_back(count * dtype_size(c.x), std::byte{0x3c});
            dy.emplace_back(count * dtype_size(c.dy), std::byte{0x3c});
            dx.emplace_back(count * dtype_size(c.dx));
        }
        options.dx_dtype = c.dx;
        if (c.from_inverse_rms) {
            measure::AlignedBuffer y(count * dtype_size(c.dy));
            for (std::size_t i = 0; i < sets; ++i) {
                inverse_rms.emplace_back(static_cast<std::size_t>(c.elements() / c.dim()));
                CallOptions forward;
                forward.out_dtype = c.dy;
                forward.inverse_rms = TensorView(inverse_rms.back().data(), DType::f32, inverse_rms_shape());
                norm.forward(ConstTensorView(x[i].data(), c.x, c.shape()), grouping, TensorView(y.data(), c.dy, c.shape()), forward);
            }
        }
    }
    // The variant the library runs on set 0.
    const detail::KernelEntry &library_kernel() {
        const Views v = views(0);
        return detail::backward_kernel(detail::norm_state_of(norm), v.x, v.dy, grouping, v.dx, v.dweight, options);
    }
    void call(std::size_t i, const detail::KernelEntry *instead = nullptr) {
        const Views v = views(i);
        if (c.from_inverse_rms) options.inverse_rms = ConstTensorView(inverse_rms[i].data(), DType::f32, inverse_rms_shape());
        detail::run_backward(detail::norm_state_of(norm), v.x, v.dy, grouping, v.dx, v.dweight, options, instead);
    }

private:
    std::vector<std::int64_t> inverse_rms_shape() const {  // the output's shape without its last axis
        std::vector<std::int64_t> s = c.shape();
        s.pop_back();
        return s;
    }
    struct Views {
        ConstTensorView x, dy;
        TensorView dx, dweight;
    };
    Views views(std::size_t i) {
        return {ConstTensorView(x[i].data(), c.x, c.shape()), ConstTensorView(dy[i].data(), c.dy, c.shape()),
                TensorView(dx[i].data(), c.dx, c.shape()), TensorView(dweight.data(), DType::f32, {c.modalities * c.dim()})};
    }
};

void run(benchmark::State &state, const BackwardCase &c) {
    CaseCalls calls(c);
    const std::size_t sets = calls.sets;
    std::vector<float> &dweight = calls.dweight;
    const auto call = [&](std::size_t i) { calls.call(i); };
    for (std::size_t i = 0; i < sets; ++i) call(i);

    const measure::CopyCeilings before = measure::copy_ceilings_now(magi2norm::num_threads());
    std::size_t i = 0;
    const auto ours_start = std::chrono::steady_clock::now();
    for (auto _ : state) {
        call(i);
        i = (i + 1) % sets;
    }
    const double ours_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - ours_start).count() /
                                static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
    const measure::CopyCeilings after = measure::copy_ceilings_now(magi2norm::num_threads());

    // The fixed-order sum alone, on partials of the case's size (cold in cache, as after a pass).
    std::vector<float> partials(static_cast<std::size_t>(c.partial_values()));
    std::vector<double> sum(static_cast<std::size_t>(c.dim()));
    std::vector<float> dscale(static_cast<std::size_t>(c.dim()));
    const auto start = std::chrono::steady_clock::now();
    constexpr int kSums = 20;
    for (int r = 0; r < kSums; ++r) {
        detail::add_partials(partials.data(), static_cast<std::int64_t>(partials.size()) / c.dim(), c.dim(), sum.data(), dscale.data());
        benchmark::DoNotOptimize(dscale.data());
    }
    const double sum_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kSums;

    using benchmark::Counter;
    const double bytes = c.bytes_moved();
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
    const double copy_bps = (before.copy_bps + after.copy_bps) / 2;
    state.counters["frac_copy"] = Counter(bytes / copy_bps, Counter::kIsIterationInvariantRate);
    state.counters["copy_ceiling_bps"] = copy_bps;
    state.counters["partial_bytes"] = 8.0 * static_cast<double>(c.partial_values());
    state.counters["reduction_us"] = sum_seconds * 1e6;
    // The sum's time as a fraction of the pass's: reduction_us over the mean iteration time.
    state.counters["reduction_share"] = Counter(sum_seconds, Counter::kIsIterationInvariantRate);

    // The peers on the same buffer sets: each warmed up on every set, then called rotating through
    // them for at least kPeerCalls calls and kPeerSeconds.
    constexpr int kPeerCalls = 5;
    constexpr double kPeerSeconds = 0.5;
    std::vector<BackwardBuffers> buffers;
    for (std::size_t s = 0; s < sets; ++s) buffers.push_back({calls.x[s].data(), calls.dy[s].data(), calls.dx[s].data()});
    const BackwardProblem problem = c.problem();
    for (const BackwardPeer &peer : peers()) {
        if (!peer.supports(problem)) continue;
        const std::string &mismatch = checked(c, peer);
        if (!mismatch.empty()) {
            std::fprintf(stderr, "%s/%s: not timed, it computes something else: %s\n", c.name().c_str(), peer.name.c_str(),
                         mismatch.c_str());
            state.counters[peer.name + "_mismatch"] = 1;
            continue;
        }
        std::unique_ptr<BackwardRunner> runner = peer.prepare(problem, buffers, std::vector<float>(dweight.size(), 0.0f));
        for (std::size_t s = 0; s < sets; ++s) benchmark::DoNotOptimize(runner->run(s).dx);
        int calls = 0;
        const auto start = std::chrono::steady_clock::now();
        double seconds = 0;
        while (calls < kPeerCalls || seconds < kPeerSeconds) {
            benchmark::DoNotOptimize(runner->run(static_cast<std::size_t>(calls) % sets).dx);
            ++calls;
            seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
        const double per_call = seconds / calls;
        state.counters[peer.name + "_us"] = per_call * 1e6;
        state.counters[peer.name + "_bytes_per_second"] = bytes / per_call;
        state.counters[peer.name + "_frac_copy"] = bytes / per_call / copy_bps;
        state.counters[peer.name + "_over_ours"] = per_call / ours_seconds;
    }
}

// The tuner's backward cases (tuning/cases.cpp: every model norm at M = 1 and 3, the final norm
// at M = 1, T = 16 to 32768, tokens split evenly: "M3_sizes", as the forward's grouped cases).
std::vector<BackwardCase> tuning_cases() {
    std::vector<BackwardCase> c;
    for (const measure::ModelNorm &n : measure::model_norms()) {
        for (const std::int64_t m : {1, 3}) {
            if (m > 1 && !n.grouped) continue;
            for (const std::int64_t t : {16, 256, 4096, 32768}) {
                BackwardCase k = model_case(n, t, m, false);
                k.even_split = true;
                c.push_back(k);
            }
        }
    }
    return c;
}

// The case's backward timed alone, rotating through its buffer sets as run() does: as the
// library runs it, or with `untuned` the untuned variant of the kind the library picks in its place.
void run_ours(benchmark::State &state, const BackwardCase &c, bool untuned) {
    CaseCalls calls(c);
    const detail::KernelEntry *instead = nullptr;
    if (untuned) {
        const detail::KernelEntry &k = calls.library_kernel();
        instead = detail::untuned_kernel(k.backend, k.in, k.out, k.form, k.streaming_alignment > 0, k.compute_capability, k.dx);
    }
    for (std::size_t i = 0; i < calls.sets; ++i) calls.call(i, instead);
    std::size_t i = 0;
    for (auto _ : state) {
        calls.call(i, instead);
        i = (i + 1) % calls.sets;
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(calls.set_bytes) * state.iterations());
}

}  // namespace

void register_backward_benchmarks() {
    for (const BackwardCase &c : cases()) {
        benchmark::RegisterBenchmark(c.name().c_str(), [c](benchmark::State &state) { run(state, c); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
    }
    const std::vector<const detail::KernelEntry *> classes = detail::class_kernels();
    const bool backward_classes = std::any_of(classes.begin(), classes.end(), [](const detail::KernelEntry *k) {
        return detail::is_backward(k->form);
    });
    if (!backward_classes) return;
    for (const BackwardCase &c : tuning_cases()) {
        const std::string name = c.name();
        for (const bool untuned : {false, true}) {
            benchmark::RegisterBenchmark((name + (untuned ? "/ours_untuned" : "/ours")).c_str(),
                                         [c, untuned](benchmark::State &state) { run_ours(state, c, untuned); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
        }
    }
}

}  // namespace magi2norm::bench
