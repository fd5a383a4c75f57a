// The backward on the model's norms (SPEC.md's table, T = 4096, one and three modalities):
// bytes moved (x and dy read once, dx written once, the partials written and read once), their
// rate, its fraction of the ordinary-store copy measured around the case, and the share of the
// weight gradient's fixed-order sum (add_partials, the runtime's own loop, timed on the case's
// partials) in the pass's time.
#include "backward.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "aligned_buffer.hpp"
#include "ceilings.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::bench {

namespace {

struct BackwardCase {
    std::string norm;
    std::vector<std::int64_t> row_shape;
    DType x, dy, dx;
    std::int64_t tokens, modalities;

    std::vector<std::int64_t> shape() const {
        std::vector<std::int64_t> s{tokens};
        s.insert(s.end(), row_shape.begin(), row_shape.end());
        return s;
    }
    std::int64_t elements() const { return element_count(shape()); }
    std::int64_t dim() const { return row_shape.back(); }
    std::string name() const {
        return "backward/" + norm + "/" + dtype_name(x) + "_" + dtype_name(dy) + "_" + dtype_name(dx) + "/M" +
               std::to_string(modalities) + "/T" + std::to_string(tokens);
    }
    // 3/4, 3/16, 1/16 of the tokens for three modalities, as the forward's cases.
    std::vector<std::int64_t> sizes() const {
        if (modalities == 1) return {tokens};
        return {tokens * 3 / 4, tokens * 3 / 16, tokens - tokens * 3 / 4 - tokens * 3 / 16};
    }
    std::int64_t partial_doubles() const {
        const std::int64_t block = detail::partial_block_tokens(elements() / tokens);
        std::int64_t blocks = 0;
        for (const std::int64_t s : sizes()) blocks += (s + block - 1) / block;
        return blocks * dim();
    }
    double bytes_moved() const {
        return static_cast<double>(elements()) * static_cast<double>(dtype_size(x) + dtype_size(dy) + dtype_size(dx)) +
               16.0 * static_cast<double>(partial_doubles());
    }
};

std::vector<BackwardCase> cases() {
    std::vector<BackwardCase> c;
    for (const std::int64_t m : {1, 3}) {
        c.push_back({"pre_norm", {3072}, DType::bf16, DType::bf16, DType::bf16, 4096, m});
        c.push_back({"qk_norm", {24, 128}, DType::bf16, DType::f32, DType::bf16, 4096, m});
        c.push_back({"mhc_norm", {12288}, DType::bf16, DType::f32, DType::bf16, 4096, m});
    }
    c.push_back({"final_norm", {12288}, DType::f32, DType::f32, DType::f32, 4096, 1});
    return c;
}

void run(benchmark::State &state, const BackwardCase &c) {
    NormConfig config;
    config.dim = c.dim();
    config.num_modality = c.modalities;
    const RMSNorm norm(config);
    const auto count = static_cast<std::size_t>(c.elements());
    // Enough sets of buffers to rotate through twice the last-level cache.
    const std::size_t set_bytes = count * (dtype_size(c.x) + dtype_size(c.dy) + dtype_size(c.dx));
    const std::size_t sets = std::clamp<std::size_t>(2 * last_level_cache_bytes() / set_bytes + 1, 1, 4);
    std::vector<tools::AlignedBuffer> x, dy, dx;
    for (std::size_t i = 0; i < sets; ++i) {
        x.emplace_back(count * dtype_size(c.x), std::byte{0x3c});
        dy.emplace_back(count * dtype_size(c.dy), std::byte{0x3c});
        dx.emplace_back(count * dtype_size(c.dx));
    }
    std::vector<float> dweight(static_cast<std::size_t>(c.modalities * c.dim()));
    const Grouping grouping = c.modalities == 1 ? Grouping::none() : Grouping::sizes(c.sizes());
    BackwardOptions options;
    options.dx_dtype = c.dx;
    const auto call = [&](std::size_t i) {
        norm.backward(ConstTensorView(x[i].data(), c.x, c.shape()), ConstTensorView(dy[i].data(), c.dy, c.shape()), grouping,
                      TensorView(dx[i].data(), c.dx, c.shape()), TensorView(dweight.data(), DType::f32, {c.modalities * c.dim()}),
                      options);
    };
    for (std::size_t i = 0; i < sets; ++i) call(i);

    const Ceilings before = ceilings_now();
    std::size_t i = 0;
    for (auto _ : state) {
        call(i);
        i = (i + 1) % sets;
    }
    const Ceilings after = ceilings_now();

    // The fixed-order sum alone, on partials of the case's size (cold in cache, as after a pass).
    std::vector<double> partials(static_cast<std::size_t>(c.partial_doubles())), sum(static_cast<std::size_t>(c.dim()));
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
    state.counters["partial_bytes"] = 16.0 * static_cast<double>(c.partial_doubles());
    state.counters["reduction_us"] = sum_seconds * 1e6;
    // The sum's time as a fraction of the pass's: reduction_us over the mean iteration time.
    state.counters["reduction_share"] = Counter(sum_seconds, Counter::kIsIterationInvariantRate);
}

}  // namespace

void register_backward_benchmarks() {
    for (const BackwardCase &c : cases()) {
        benchmark::RegisterBenchmark(c.name().c_str(), [c](benchmark::State &state) { run(state, c); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
    }
}

}  // namespace magi2norm::bench
