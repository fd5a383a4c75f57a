// The bits recorder: a fixed set of calls (forward and backward, every CPU family and form, every
// grouping form, and the mHC logits, on the CPU targets only) whose outputs' digests must equal the committed ones (digests.txt) on every
// target: each CPU ISA the machine has, forced in turn, and OpenCL. A change that moves any output
// bit shows here, call by call; a target that computes with another arithmetic fails.
//
//   magi2norm_bits check FILE --target T              compare target T's digests with FILE's
//   magi2norm_bits record FILE --random N             write the widest CPU target's digests
//   magi2norm_bits print --target T --random N        print them (scripts/bits_corpus.sh)
//
// The calls: a fixed set of named ones, SPEC.md's golden cases, and N random ones (the same N
// calls on every machine).
// Targets: avx512_bf16, avx512, avx2, sse41 (the CPU variants' code for that ISA, forced through
// Halide's feature hook), opencl and cuda (scripts/gpu_check.sh). Each call also runs at 1 and 4
// threads and must agree.
#include <HalideRuntime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "magi2norm/float_codecs.hpp"
#include "magi2norm/magi2norm.hpp"
#include "magi2norm/safetensors.hpp"
#include "splitmix64.hpp"

namespace {

using magi2norm::Backend;
using magi2norm::DType;
using magi2norm::Grouping;

// ---- the forced ISA ------------------------------------------------------------------------

enum class Isa { avx512_bf16, avx512, avx2, sse41, none };
Isa forced_isa = Isa::none;
int hook_calls = 0;

// Whether `isa` has `feature`; features other than x86 ISA extensions (large_buffers,
// strict_float, ...) are left to Halide's own test.
bool allowed_at(Isa isa, int feature) {
    switch (feature) {
    case halide_target_feature_avx:
    case halide_target_feature_avx2:
    case halide_target_feature_fma:
    case halide_target_feature_fma4:
    case halide_target_feature_f16c: return isa != Isa::sse41;
    case halide_target_feature_avx512:
    case halide_target_feature_avx512_knl:
    case halide_target_feature_avx512_skylake:
    case halide_target_feature_avx512_cannonlake: return isa == Isa::avx512 || isa == Isa::avx512_bf16;
    case halide_target_feature_avx512_sapphirerapids:
    case halide_target_feature_avx512_zen4:
    case halide_target_feature_avx512_zen5:
    case halide_target_feature_avx10_1: return isa == Isa::avx512_bf16;
    default: return true;
    }
}

int forced_features(int count, const std::uint64_t *features) {
    ++hook_calls;
    for (int i = 0; i < count * 64; ++i) {
        if ((features[i / 64] >> (i % 64) & 1) != 0 && !allowed_at(forced_isa, i)) return 0;
    }
    return halide_default_can_use_target_features(count, features);
}

// ---- data ----------------------------------------------------------------------------------

// splitmix64 (measure/splitmix64.hpp): the same values on every machine.
struct Rng {
    magi2norm::measure::SplitMix64 bits;
    std::uint64_t next() { return bits.next(); }
    double uniform() { return (next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// Values whose rows span many binades (a few large elements among small ones, rows scaled from
// 2^-20 to 2^20), so that a sum taken in another order gives other bits.
std::vector<float> values(std::int64_t count, std::int64_t row, std::uint64_t seed) {
    Rng rng{magi2norm::measure::SplitMix64(seed)};
    std::vector<float> v(static_cast<std::size_t>(count));
    double row_scale = 1;
    for (std::int64_t i = 0; i < count; ++i) {
        if (i % row == 0) row_scale = std::ldexp(1.0, static_cast<int>(rng.next() % 41) - 20);
        double u = 2 * rng.uniform() - 1;
        double binade = std::ldexp(1.0, static_cast<int>(rng.next() % 24) - 12);
        v[static_cast<std::size_t>(i)] = static_cast<float>(u * binade * row_scale);
    }
    return v;
}

// FNV-1a 64: a hash of a byte stream (`h` the hash so far), for the digests and the calls' seeds.
constexpr std::uint64_t kFnvStart = 0xcbf29ce484222325ull;
std::uint64_t fnv1a(std::uint64_t h, std::uint8_t byte) { return (h ^ byte) * 0x100000001b3ull; }

// A buffer of `count` elements of `dtype`, 64-byte aligned, holding `v` rounded to the dtype.
struct Buffer {
    std::shared_ptr<std::uint8_t> bytes;
    DType dtype;
    std::size_t size;
    Buffer(DType d, std::int64_t count) : dtype(d), size(static_cast<std::size_t>(count) * magi2norm::dtype_size(d)) {
        const std::size_t allocated = (size + 63) / 64 * 64 + 64;
        void *p = std::aligned_alloc(64, allocated);
        std::memset(p, 0, allocated);
        bytes.reset(static_cast<std::uint8_t *>(p), std::free);
    }
    void fill(const std::vector<float> &v) {
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (dtype == DType::f32) {
                std::memcpy(bytes.get() + 4 * i, &v[i], 4);
            } else {
                std::uint16_t h = dtype == DType::bf16 ? magi2norm::f32_to_bf16(v[i]) : magi2norm::f32_to_f16(v[i]);
                std::memcpy(bytes.get() + 2 * i, &h, 2);
            }
        }
    }
    // FNV-1a over the elements' bits, each NaN as the dtype's canonical quiet NaN: a NaN's payload
    // follows the target's arithmetic (x86's default NaN is negative, CUDA's positive), so the
    // guarantee is NaN for NaN, every other bit equal.
    std::uint64_t digest(std::uint64_t h = kFnvStart) const {
        const std::size_t elem = magi2norm::dtype_size(dtype);
        for (std::size_t i = 0; i < size; i += elem) {
            std::uint32_t bits = 0;
            std::memcpy(&bits, bytes.get() + i, elem);
            const bool nan = dtype == DType::f32    ? (bits & 0x7fffffffu) > 0x7f800000u
                             : dtype == DType::bf16 ? (bits & 0x7fffu) > 0x7f80u
                                                    : (bits & 0x7fffu) > 0x7c00u;
            if (nan) bits = dtype == DType::f32 ? 0x7fc00000u : dtype == DType::bf16 ? 0x7fc0u : 0x7e00u;
            for (std::size_t b = 0; b < elem; ++b) h = fnv1a(h, static_cast<std::uint8_t>(bits >> (8 * b)));
        }
        return h;
    }
};

// ---- the calls -----------------------------------------------------------------------------

struct Run {
    Backend backend;
    int threads;
};

// One call: builds its inputs from its name's seed, runs, and returns the digest of its outputs.
struct Call {
    std::string name;
    std::function<std::uint64_t(const Run &)> run;
    bool cpu_only = false;  // an operation with CPU variants only (the mHC logits)
};

std::uint64_t seed_of(const std::string &name) {
    std::uint64_t h = kFnvStart;
    for (char c : name) h = fnv1a(h, static_cast<std::uint8_t>(c));
    return h;
}

struct Shape {
    std::vector<std::int64_t> x;  // [T, ..., D]
    std::int64_t M = 1, P = 1;
    Grouping::Kind grouping = Grouping::Kind::none;
    std::int64_t pad = 0;  // elements between x's rows (a strided view)

    // x's strides: rows of D + pad elements.
    std::vector<std::int64_t> strides() const {
        std::vector<std::int64_t> st(x.size(), 1);
        std::int64_t step = x.back() + pad;
        for (std::size_t i = x.size() - 1; i-- > 0;) {
            st[i] = step;
            step *= x[i];
        }
        return st;
    }
    std::int64_t elements() const {
        std::int64_t n = x.back() + pad;
        for (std::size_t i = 0; i + 1 < x.size(); ++i) n *= x[i];
        return n;
    }
};

struct Inputs {
    magi2norm::RMSNorm norm;
    Buffer x;
    Grouping::Kind kind;
    std::vector<std::int64_t> sizes;
    std::vector<std::int32_t> ids;
    Grouping grouping() const {
        if (kind == Grouping::Kind::sizes) return Grouping::sizes(sizes);
        if (kind == Grouping::Kind::ids) return Grouping::ids(ids.data(), static_cast<std::int64_t>(ids.size()));
        return Grouping::none();
    }
};

Inputs make_inputs(const std::string &name, const Shape &shape, DType in, DType out) {
    const std::int64_t dim = shape.x.back(), tokens = shape.x.front();
    Rng rng{magi2norm::measure::SplitMix64(seed_of(name) ^ 1)};
    const std::int64_t weights = shape.M * shape.P * dim;
    std::vector<float> w(static_cast<std::size_t>(weights));
    for (auto &v : w) v = static_cast<float>(rng.uniform() - 0.5);
    Buffer weight(DType::bf16, weights);
    weight.fill(w);
    magi2norm::NormConfig config{dim, 1e-6f, shape.M, shape.P, out};
    Inputs inputs{magi2norm::RMSNorm(config, magi2norm::ConstTensorView(weight.bytes.get(), DType::bf16, {weights})),
                  Buffer(in, shape.elements()), shape.grouping, {}, {}};
    inputs.x.fill(values(shape.elements(), dim + shape.pad, seed_of(name)));
    if (shape.grouping == Grouping::Kind::sizes) {
        std::int64_t left = tokens;
        for (std::int64_t m = 0; m + 1 < shape.M; ++m) {
            std::int64_t s = static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(left + 1));
            inputs.sizes.push_back(s);
            left -= s;
        }
        inputs.sizes.push_back(left);
    } else if (shape.grouping == Grouping::Kind::ids) {
        for (std::int64_t t = 0; t < tokens; ++t) inputs.ids.push_back(static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(shape.M)));
    }
    return inputs;
}

// Forward: y, and with `training` the inverse RMS; `streaming` forces streaming stores.
Call forward_call(const std::string &name, Shape shape, DType in, DType out, bool training = false, bool streaming = false) {
    return {name, [=](const Run &run) {
                Inputs inputs = make_inputs(name, shape, in, out);
                std::vector<std::int64_t> y_shape = inputs.norm.output_shape(shape.x);
                Buffer y(out, magi2norm::element_count(y_shape));
                std::vector<std::int64_t> rows_shape(y_shape.begin(), y_shape.end() - 1);
                Buffer inv(DType::f32, magi2norm::element_count(rows_shape));
                magi2norm::CallOptions options;
                options.stream.backend = run.backend;
                options.num_threads = run.threads;
                if (training) options.inverse_rms = magi2norm::TensorView(inv.bytes.get(), DType::f32, rows_shape);
                if (streaming) options.streaming = magi2norm::StreamingPolicy{1, 2, 1};
                inputs.norm.forward(magi2norm::ConstTensorView(inputs.x.bytes.get(), in, shape.x, shape.strides()), inputs.grouping(),
                                    magi2norm::TensorView(y.bytes.get(), out, y_shape), options);
                return training ? inv.digest(y.digest()) : y.digest();
            }};
}

// Backward: dx and dweight (FP32), with or without the forward's inverse RMS.
Call backward_call(const std::string &name, Shape shape, DType in, DType dy_type, DType dx_type, bool given_inverse_rms = false) {
    return {name, [=](const Run &run) {
                Inputs inputs = make_inputs(name, shape, in, in);
                std::vector<std::int64_t> y_shape = inputs.norm.output_shape(shape.x);
                Buffer dy(dy_type, magi2norm::element_count(y_shape));
                dy.fill(values(magi2norm::element_count(y_shape), y_shape.back(), seed_of(name) ^ 2));
                Buffer dx(dx_type, magi2norm::element_count(shape.x));
                Buffer dweight(DType::f32, shape.M * shape.P * shape.x.back());
                std::vector<std::int64_t> rows_shape(y_shape.begin(), y_shape.end() - 1);
                Buffer inv(DType::f32, magi2norm::element_count(rows_shape));
                Buffer y(in, magi2norm::element_count(y_shape));
                const magi2norm::ConstTensorView x_view(inputs.x.bytes.get(), in, shape.x, shape.strides());
                magi2norm::BackwardOptions options;
                options.dx_dtype = dx_type;
                options.stream.backend = run.backend;
                options.num_threads = run.threads;
                if (given_inverse_rms) {
                    magi2norm::CallOptions forward;
                    forward.stream.backend = Backend::cpu;
                    forward.inverse_rms = magi2norm::TensorView(inv.bytes.get(), DType::f32, rows_shape);
                    inputs.norm.forward(x_view, inputs.grouping(), magi2norm::TensorView(y.bytes.get(), in, y_shape), forward);
                    options.inverse_rms = magi2norm::ConstTensorView(inv.bytes.get(), DType::f32, rows_shape);
                }
                inputs.norm.backward(x_view, magi2norm::ConstTensorView(dy.bytes.get(), dy_type, y_shape), inputs.grouping(),
                                     magi2norm::TensorView(dx.bytes.get(), dx_type, shape.x),
                                     magi2norm::TensorView(dweight.bytes.get(), DType::f32, {static_cast<std::int64_t>(dweight.size / 4)}), options);
                return dweight.digest(dx.digest());
            }};
}

// The mHC logits of x [T, D] with phi [D, N] FP32: the logits, then the inverse RMS.
Call mhc_logits_call(const std::string &name, Shape shape, DType in, std::int64_t columns) {
    return {name,
            [=](const Run &run) {
                Inputs inputs = make_inputs(name, shape, in, DType::f32);
                const std::int64_t dim = shape.x.back(), tokens = shape.x.front();
                Buffer phi(DType::f32, dim * columns), logits(DType::f32, tokens * columns), inv(DType::f32, tokens);
                phi.fill(values(dim * columns, columns, seed_of(name) ^ 3));
                magi2norm::MhcLogitsOptions options;
                options.num_threads = run.threads;
                options.inverse_rms = magi2norm::TensorView(inv.bytes.get(), DType::f32, {tokens});
                inputs.norm.mhc_logits(magi2norm::ConstTensorView(inputs.x.bytes.get(), in, shape.x, shape.strides()), inputs.grouping(),
                                       magi2norm::ConstTensorView(phi.bytes.get(), DType::f32, {dim, columns}),
                                       magi2norm::TensorView(logits.bytes.get(), DType::f32, {tokens, columns}), options);
                return logits.digest(inv.digest());
            },
            true};
}

std::vector<Call> calls() {
    using G = Grouping::Kind;
    const DType f32 = DType::f32, bf16 = DType::bf16, f16 = DType::f16;
    const std::map<std::string, DType> dtypes = {{"f32", f32}, {"bf16", bf16}, {"f16", f16}};
    std::vector<Call> c;
    // Every dtype pair, on an odd width (the last block partial) and the model's widths.
    for (const auto &[in_name, in] : dtypes) {
        for (const auto &[out_name, out] : dtypes) {
            c.push_back(forward_call("forward/" + in_name + "_" + out_name + "/T9_D300", {{9, 300}}, in, out));
            c.push_back(forward_call("forward/" + in_name + "_" + out_name + "/T3_D12288_M3_sizes", {{3, 12288}, 3, 1, G::sizes}, in, out));
        }
    }
    // The model's norms: pre-norm (paired words for BF16 -> BF16), Q/K, mHC, final.
    c.push_back(forward_call("forward/pre_norm/T33_D3072_M3_ids", {{33, 3072}, 3, 1, G::ids}, bf16, bf16));
    c.push_back(forward_call("forward/qk_norm/T7_H24_D128", {{7, 24, 128}}, bf16, f32));
    c.push_back(forward_call("forward/mhc_norm/T5_D12288", {{5, 12288}}, bf16, f32));
    c.push_back(forward_call("forward/final_norm/T5_D12288", {{5, 12288}}, f32, f32));
    // Patterns, broadcasting a singleton head, one-row calls, D = 1 and D = 17.
    c.push_back(forward_call("forward/patterns/T4_P3_D64_M2_sizes", {{4, 3, 64}, 2, 3, G::sizes}, f16, f32));
    c.push_back(forward_call("forward/broadcast/T6_1_D96_P4", {{6, 1, 96}, 1, 4}, bf16, bf16));
    c.push_back(forward_call("forward/one_row/T1_D3072", {{1, 3072}}, bf16, bf16));
    c.push_back(forward_call("forward/one_row/T1_D12288", {{1, 12288}}, f32, f32));
    c.push_back(forward_call("forward/tiny/T5_D1", {{5, 1}}, f32, f32));
    c.push_back(forward_call("forward/tiny/T5_D17", {{5, 17}}, bf16, f32));
    // Streaming stores, the training form.
    c.push_back(forward_call("forward/streaming/T64_D3072", {{64, 3072}}, bf16, bf16, false, true));
    c.push_back(forward_call("forward/streaming/T16_D12288", {{16, 12288}}, bf16, f32, false, true));
    c.push_back(forward_call("forward/training/T33_D3072_M3_ids", {{33, 3072}, 3, 1, G::ids}, bf16, bf16, true));
    c.push_back(forward_call("forward/training/T7_H24_D128", {{7, 24, 128}}, bf16, f32, true));
    c.push_back(forward_call("forward/training/T3_D12288", {{3, 12288}}, f32, f32, true));
    // Backward: the model's norms, with and without the forward's inverse RMS, every grouping.
    c.push_back(backward_call("backward/pre_norm/T33_D3072_M3_ids", {{33, 3072}, 3, 1, G::ids}, bf16, bf16, bf16));
    c.push_back(backward_call("backward/pre_norm/T33_D3072_M3_sizes_inv", {{33, 3072}, 3, 1, G::sizes}, bf16, bf16, bf16, true));
    c.push_back(backward_call("backward/qk_norm/T7_H24_D128", {{7, 24, 128}}, bf16, f32, bf16));
    c.push_back(backward_call("backward/qk_norm/T7_H24_D128_inv", {{7, 24, 128}}, bf16, f32, bf16, true));
    c.push_back(backward_call("backward/mhc_norm/T5_D12288", {{5, 12288}}, bf16, f32, f32));
    c.push_back(backward_call("backward/final_norm/T5_D12288_inv", {{5, 12288}}, f32, f32, f32, true));
    c.push_back(backward_call("backward/f16/T9_D300", {{9, 300}}, f16, f16, f16));
    c.push_back(backward_call("backward/f16_f32_bf16/T9_D300", {{9, 300}}, f16, f32, bf16));
    c.push_back(backward_call("backward/patterns/T4_P3_D64_M2_sizes", {{4, 3, 64}, 2, 3, G::sizes}, f32, f32, f32));
    c.push_back(backward_call("backward/broadcast/T6_1_D96_P4", {{6, 1, 96}, 1, 4}, bf16, bf16, bf16));
    c.push_back(backward_call("backward/tiny/T5_D1", {{5, 1}}, f32, f32, f32));
    c.push_back(backward_call("backward/large/T512_D3072", {{512, 3072}}, bf16, bf16, bf16));
    // The mHC logits: the model's case, other dtypes, odd D and N, every grouping, strided rows.
    c.push_back(mhc_logits_call("mhc_logits/bf16/T21_D12288_N24_M3_sizes", {{21, 12288}, 3, 1, G::sizes}, bf16, 24));
    c.push_back(mhc_logits_call("mhc_logits/f32/T9_D300_N7_M2_ids", {{9, 300}, 2, 1, G::ids, 4}, f32, 7));
    c.push_back(mhc_logits_call("mhc_logits/f16/T3_D33_N64", {{3, 33}}, f16, 64));
    return c;
}

// One call a golden case of SPEC.md (the folder MAGI2NORM_GOLDEN_DIR names in the environment,
// else the build's, ../shared/golden): its x, weight and grouping, forward. None where the folder
// is missing (a check then reports the recorded golden calls as not run).
std::vector<Call> golden_calls() {
    std::vector<Call> c;
    const char *env = std::getenv("MAGI2NORM_GOLDEN_DIR");
    const std::filesystem::path dir = env != nullptr ? env : MAGI2NORM_GOLDEN_DIR;
    if (!std::filesystem::is_directory(dir)) return c;
    std::vector<std::filesystem::path> paths;
    for (const auto &entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() == ".safetensors") paths.push_back(entry.path());
    }
    std::sort(paths.begin(), paths.end());
    for (const auto &path : paths) {
        c.push_back({"golden/" + path.stem().string(), [path](const Run &run) {
                         const auto file = magi2norm::safetensors::File::open(path.string());
                         const auto &meta = file.metadata();
                         const magi2norm::NormConfig config{std::stoll(meta.at("dim")), std::stof(meta.at("eps")),
                                                            std::stoll(meta.at("num_modality")), std::stoll(meta.at("num_patterns")),
                                                            magi2norm::parse_dtype(meta.at("out_dtype"))};
                         const magi2norm::RMSNorm norm(config, file.view("weight"));
                         const magi2norm::ConstTensorView x = file.view("x");
                         std::vector<std::int64_t> sizes;
                         Grouping grouping = Grouping::none();
                         if (file.contains("group_sizes")) {
                             const auto &t = file.tensor("group_sizes");
                             const auto *v = static_cast<const std::int32_t *>(t.data);
                             sizes.assign(v, v + t.nbytes / 4);
                             grouping = Grouping::sizes(sizes);
                         } else if (file.contains("modality")) {
                             const auto &t = file.tensor("modality");
                             grouping = Grouping::ids(static_cast<const std::int32_t *>(t.data), static_cast<std::int64_t>(t.nbytes / 4));
                         }
                         const DType out = norm.output_dtype(x.dtype);
                         const std::vector<std::int64_t> y_shape = norm.output_shape(x.shape);
                         Buffer y(out, magi2norm::element_count(y_shape));
                         magi2norm::CallOptions options;
                         options.stream.backend = run.backend;
                         options.num_threads = run.threads;
                         norm.forward(x, grouping, magi2norm::TensorView(y.bytes.get(), out, y_shape), options);
                         return y.digest();
                     }});
    }
    return c;
}

// `count` random calls (the same for a count on every machine): dtypes, D from 1 to 12288,
// M, P, broadcasting, heads, groupings, strided inputs, in-cache and from-memory sizes (outputs
// past the 4 MiB streaming threshold), the training form, and the backward with and without the
// forward's inverse RMS.
std::vector<Call> random_calls(int count) {
    using G = Grouping::Kind;
    const DType dtypes[] = {DType::f32, DType::bf16, DType::f16};
    const char *names[] = {"f32", "bf16", "f16"};
    const std::int64_t widths[] = {1, 2, 3, 7, 16, 17, 63, 64, 100, 128, 255, 300, 768, 1000, 1536, 3072, 4097, 12288};
    std::vector<Call> c;
    for (int i = 0; i < count; ++i) {
        Rng rng{magi2norm::measure::SplitMix64(seed_of("random") + static_cast<std::uint64_t>(i))};
        const auto pick = [&](std::uint64_t n) { return static_cast<std::int64_t>(rng.next() % n); };
        const int in = static_cast<int>(pick(3)), out = static_cast<int>(pick(3)), dx = static_cast<int>(pick(3));
        const bool backward = pick(5) < 2;
        Shape shape;
        const std::int64_t dim = widths[pick(std::size(widths))];
        shape.M = 1 + pick(3);
        shape.P = pick(3) == 0 ? 1 + pick(3) : 1;
        const std::int64_t heads = shape.P > 1 ? (pick(2) == 0 ? 1 : shape.P) : (pick(3) == 0 ? 1 + pick(4) : 0);
        shape.grouping = shape.M == 1 ? G::none : pick(2) == 0 ? G::sizes : G::ids;
        shape.pad = pick(4) == 0 ? 1 + pick(16) : 0;
        const std::int64_t rows = std::max<std::int64_t>(1, heads) * dim;
        const bool from_memory = pick(5) == 0;
        const std::int64_t tokens = from_memory ? (std::int64_t{4} << 20) / (rows * 2) + 1 + pick(8) : pick(40);
        shape.x = heads > 0 ? std::vector<std::int64_t>{tokens, heads, dim} : std::vector<std::int64_t>{tokens, dim};
        const int dy = pick(2) == 0 ? in : 0;  // dy in x's dtype or FP32
        std::string name = "random/" + std::to_string(i) + "/" + (backward ? "backward_" : "forward_") + names[in] + "_" +
                           names[backward ? dy : out];
        if (backward) {
            const bool given = pick(2) == 0;
            name += std::string("_") + names[dx] + "/T" + std::to_string(tokens) + "_D" + std::to_string(dim) + (given ? "_inv" : "");
            c.push_back(backward_call(name, shape, dtypes[in], dtypes[dy], dtypes[dx], given));
        } else {
            const bool training = pick(5) == 0;
            name += "/T" + std::to_string(tokens) + "_D" + std::to_string(dim) + (training ? "_training" : "");
            c.push_back(forward_call(name, shape, dtypes[in], dtypes[out], training));
        }
    }
    return c;
}

// ---- digests files -------------------------------------------------------------------------

std::string hex(std::uint64_t v) {
    char s[17];
    std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
    return s;
}

// A digests file: its digests by call, and `random`, the count of random calls it records (its
// line "random N").
std::map<std::string, std::string> read_digests(const std::string &path, int &random) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::map<std::string, std::string> digests;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        std::string name, digest;
        fields >> name >> digest;
        if (name == "random") {
            random = std::stoi(digest);
        } else {
            digests[name] = digest;
        }
    }
    return digests;
}

// The digests of `calls` on `backend`, each the same at 1 and 4 threads (else a failure).
std::map<std::string, std::string> digests_of(const std::vector<Call> &calls, Backend backend, int &failures) {
    std::map<std::string, std::string> digests;
    for (const Call &call : calls) {
        std::uint64_t one = 0, four = 0;
        try {
            one = call.run({backend, 1});
            four = call.run({backend, 4});
        } catch (const std::exception &e) {
            throw std::runtime_error(call.name + ": " + e.what());
        }
        if (one != four) {
            std::printf("DIFFERS  %s: %s at 1 thread, %s at 4\n", call.name.c_str(), hex(one).c_str(), hex(four).c_str());
            ++failures;
        }
        digests[call.name] = hex(one);
    }
    return digests;
}

int usage() {
    std::fprintf(stderr, "usage: magi2norm_bits check FILE [--target T]                compare with FILE's digests\n"
                         "       magi2norm_bits record FILE [--random N]              write the digests to FILE\n"
                         "       magi2norm_bits print [--target T] [--random N]       print the digests\n"
                         "T: avx512_bf16 (the default), avx512, avx2, sse41, opencl, cuda; N: random calls added\n"
                         "(check: as many as FILE records)\n");
    return 2;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const std::string mode = argv[1];
    std::string path, target = "avx512_bf16";
    int random = 0;
    int a = 2;
    if (mode == "check" || mode == "record") {
        if (argc < 3) return usage();
        path = argv[a++];
    } else if (mode != "print") {
        return usage();
    }
    for (; a + 1 < argc; a += 2) {
        const std::string option = argv[a];
        if (option == "--target") {
            target = argv[a + 1];
        } else if (option == "--random") {
            random = std::atoi(argv[a + 1]);
        } else {
            return usage();
        }
    }
    const bool random_given = std::find(argv + 2, argv + argc, std::string("--random")) != argv + argc;
    if (a != argc || (mode == "record" && target != "avx512_bf16") || (mode == "check" && random_given)) return usage();
    const std::map<std::string, Isa> isas = {
        {"avx512_bf16", Isa::avx512_bf16}, {"avx512", Isa::avx512}, {"avx2", Isa::avx2}, {"sse41", Isa::sse41}};
    Backend backend = Backend::cpu;
    if (target == "opencl" || target == "cuda") {
        backend = target == "opencl" ? Backend::opencl : Backend::cuda;
        std::string why;
        if (!magi2norm::backend_available(backend, &why)) {
            std::printf("SKIPPED: no %s device (%s)\n", target.c_str(), why.c_str());
            return 0;
        }
    } else if (isas.count(target) != 0) {
        forced_isa = isas.at(target);
        halide_set_custom_can_use_target_features(forced_features);
    } else {
        return usage();
    }
    try {
        int failures = 0;
        std::map<std::string, std::string> expected;
        if (mode == "check") expected = read_digests(path, random);  // the file's random calls
        std::vector<Call> all = calls();
        for (Call &c : golden_calls()) all.push_back(std::move(c));
        for (Call &c : random_calls(random)) all.push_back(std::move(c));
        if (backend != Backend::cpu) {  // the CPU-only calls are neither run nor expected here
            for (const Call &c : all) {
                if (c.cpu_only) expected.erase(c.name);
            }
            all.erase(std::remove_if(all.begin(), all.end(), [](const Call &c) { return c.cpu_only; }), all.end());
        }
        const auto digests = digests_of(all, backend, failures);
        if (backend == Backend::cpu && hook_calls == 0) {
            std::printf("the forced ISA never reached the variants' dispatch\n");
            return 1;
        }
        if (mode == "record") {
            std::ofstream out(path);
            out << "# The digests (FNV-1a 64 of the outputs' elements, NaNs canonical) of tests/bits/bits_recorder.cpp's\n"
                   "# calls, the same on every target, and how many random calls it holds. Written by\n"
                   "# `magi2norm_bits record FILE --random N`; a change that moves them says so.\n";
            out << "random " << random << '\n';
            for (const auto &[name, digest] : digests) out << name << ' ' << digest << '\n';
            std::printf("%zu digests written to %s\n", digests.size(), path.c_str());
            return failures == 0 ? 0 : 1;
        }
        if (mode == "print") {
            for (const auto &[name, digest] : digests) std::printf("%s %s\n", name.c_str(), digest.c_str());
            return failures == 0 ? 0 : 1;
        }
        for (const auto &[name, digest] : digests) {
            auto it = expected.find(name);
            if (it == expected.end()) {
                std::printf("MISSING  %s %s (not in %s)\n", name.c_str(), digest.c_str(), path.c_str());
                ++failures;
            } else if (it->second != digest) {
                std::printf("MOVED    %s on %s: %s, recorded %s\n", name.c_str(), target.c_str(), digest.c_str(), it->second.c_str());
                ++failures;
            }
        }
        for (const auto &[name, digest] : expected) {
            if (digests.count(name) == 0) {
                std::printf("NOT RUN  %s (in %s)\n", name.c_str(), path.c_str());
                ++failures;
            }
        }
        std::printf("%s: %zu calls, %d differ\n", target.c_str(), digests.size(), failures);
        return failures == 0 ? 0 : 1;
    } catch (const std::exception &e) {
        std::printf("error: %s\n", e.what());
        return 1;
    }
}
