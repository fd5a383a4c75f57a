// The pieces of the norm's algorithm that the forward (magi2_norm_generator.cpp) and the
// backward (magi2_norm_backward_generator.cpp) share, defined once: storage types and their
// codecs, and the row sums (FP32 partials of a few terms accumulated in FP64 per lane, then a
// tree over the lanes, on every target), so that the backward's inverse RMS is the forward's, and
// every target's the CPU's, bit for bit.
#pragma once

#include "Halide.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "float_codecs.h"
#include "kernel_abi.h"

namespace magi2norm::algorithm {

enum class Storage { F32, BF16, F16 };

inline const std::map<std::string, Storage> kStorageNames = {
    {"f32", Storage::F32}, {"bf16", Storage::BF16}, {"f16", Storage::F16}};

inline Halide::Type element_type(Storage s) { return s == Storage::F32 ? Halide::Float(32) : Halide::UInt(16); }

inline Halide::Expr decode(Storage s, const Halide::Expr &v, const Halide::Target &target) {
    switch (s) {
    case Storage::BF16: return bf16_to_f32(v);
    case Storage::F16: return f16_codec_is_native(target) ? f16_to_f32_native(v) : f16_to_f32(v);
    default: return v;
    }
}

// The NaNs the FP32 result can hold (NanBits): those of `in` on `target`'s arithmetic.
inline NanBits result_nans(Storage in, const Halide::Target &target) {
    return in == Storage::BF16 && !target.has_gpu_feature() ? NanBits::low_half_clear : NanBits::any;
}

// `native_bf16`: BF16 by the AVX-512 BF16 conversion (f32_to_bf16_native), the same bits.
inline Halide::Expr encode(Storage s, const Halide::Expr &v, NanBits nans, const Halide::Target &target,
                           bool native_bf16 = false) {
    switch (s) {
    case Storage::BF16: return native_bf16 ? f32_to_bf16_native(v, nans) : f32_to_bf16(v, nans);
    case Storage::F16: return f16_codec_is_native(target) ? f32_to_f16_native(v) : f32_to_f16(v);
    default: return v;
    }
}

// The FP64 sum of the 16 lanes' sums, as a tree: lane l with lane l + 8, then + 4, + 2, + 1,
// so the last lane is added after 4 dependent additions instead of 16 (a row's sum, sqrt and
// divide are one dependent chain before its output starts, which short rows feel). The same
// tree on every CPU form and path, so their results agree bit for bit.
inline Halide::Expr lane_tree(const std::function<Halide::Expr(int)> &lane) {
    std::vector<Halide::Expr> sums;
    for (int l = 0; l < abi::kSumLanes; ++l) sums.push_back(lane(l));
    for (std::size_t half = sums.size() / 2; half > 0; half /= 2) {
        for (std::size_t l = 0; l < half; ++l) sums[l] = sums[l] + sums[l + half];
        sums.resize(half);
    }
    return sums[0];
}

// One lane's FP32 partial of a block, widened to FP64: its `steps` terms term_at(0),
// term_at(1), ... added left to right (the forms index their terms differently).
inline Halide::Expr partial_sum(int steps, const std::function<Halide::Expr(int)> &term_at) {
    Halide::Expr partial = term_at(0);
    for (int k = 1; k < steps; ++k) partial = partial + term_at(k);
    return Halide::cast<double>(partial);
}

// inv = 1 / sqrt(float32(sum) / D + eps), from a row's FP64 sum of squares.
inline Halide::Expr inverse_rms(const Halide::Expr &sum_squares, const Halide::Expr &dim, const Halide::Expr &eps) {
    using namespace Halide;
    return 1.0f / sqrt(cast<float>(sum_squares) / cast<float>(dim) + eps);
}

// The modality of token t: its per-token id plus the number of group starts cu[1..] at or below
// t, clamped to the scale table's blocks. Grouping by sizes passes zero ids (a stride-0 view of
// one zero) and the starts; grouping by ids passes starts past every token. The starts are
// scalar arguments, not a buffer, so a GPU launch needs no host-to-device copy for them.
inline Halide::Expr modality_of(const Halide::Expr &token_id, const std::vector<Halide::Expr> &group_starts,
                                const Halide::Var &t, const Halide::Expr &num_modality) {
    using namespace Halide;
    Expr later_groups = 0;
    for (const Expr &start : group_starts) later_groups += select(t >= start, 1, 0);
    return clamp(token_id + later_groups, 0, num_modality - 1);
}

// The norm's FP32 output of an element: (xf * inv) * scale, in that order.
inline Halide::Expr normalized(const Halide::Expr &xf, const Halide::Expr &inv, const Halide::Expr &scale) {
    return (xf * inv) * scale;
}

// The sums over d of terms[i](d, h, a, t) for d in [0, dim), in one pass over the row, on every
// target (a GPU schedule gives each lane a thread, a CPU schedule vectorizes over them): lane
// l of block b adds the terms at b * 16 steps + l + 16 k, k < steps, in FP32 left to right (terms
// past the row are zeros, which add exactly); `lane_sums`(lane, h, a, t) accumulates its lane's
// partials in FP64 over `blocks`; a sum is the lanes' tree. With one term `lane_sums` and `sum`
// hold one value, with more a Tuple of one value a term, each added as if it were alone. A
// schedule places `lane_sums` and vectorizes over `lane`.
struct RowSum {
    Halide::Func lane_sums;
    Halide::Func sum;  // (h, a, t), FP64
    Halide::RDom blocks;
};

// Element `i` of a Func's value: the value itself for a Func of one value.
inline Halide::Expr element(const Halide::FuncRef &ref, std::size_t i) {
    return ref.size() == 1 ? Halide::Expr(ref) : Halide::Expr(ref[static_cast<int>(i)]);
}

inline void define(Halide::FuncRef ref, const std::vector<Halide::Expr> &values) {
    if (values.size() == 1) {
        ref = values[0];
    } else {
        ref = Halide::Tuple(values);
    }
}

inline RowSum row_sums(const std::vector<Halide::Func> &terms, const Halide::Expr &dim, int steps, const Halide::Var &lane,
                       const std::string &name) {
    using namespace Halide;
    Var h("h"), a("a"), t("t");
    const int block = abi::kSumLanes * steps;
    RowSum s;
    s.blocks = RDom(0, (dim + block - 1) / block, name + "_blocks");
    s.lane_sums = Func(name + "_lanes");
    s.sum = Func(name);
    std::vector<Expr> zeros, updates, trees;
    for (std::size_t i = 0; i < terms.size(); ++i) zeros.push_back(cast<double>(0));
    define(s.lane_sums(lane, h, a, t), zeros);
    for (std::size_t i = 0; i < terms.size(); ++i) {
        // Positions past the row read as zero terms: adding 0 is exact, so the last, partial block
        // adds the row's own terms in the same order as a whole block would. The boundary
        // condition marks its test `likely`, so Halide peels the last block off the loop and
        // whole blocks run without the test.
        Func padded = BoundaryConditions::constant_exterior(terms[i], 0.0f, {{0, dim}});  // bounds d only
        updates.push_back(element(s.lane_sums(lane, h, a, t), i) +
                          partial_sum(steps, [&](int k) { return padded(s.blocks * block + lane + k * abi::kSumLanes, h, a, t); }));
    }
    define(s.lane_sums(lane, h, a, t), updates);
    for (std::size_t i = 0; i < terms.size(); ++i) {
        trees.push_back(lane_tree([&](int l) { return element(s.lane_sums(l, h, a, t), i); }));
    }
    define(s.sum(h, a, t), trees);
    return s;
}

inline RowSum row_sum(const Halide::Func &term, const Halide::Expr &dim, int steps, const Halide::Var &lane,
                      const std::string &name) {
    return row_sums({term}, dim, steps, lane, name);
}

}  // namespace magi2norm::algorithm
