// The calls a tuning run measures, and the shape classes that group them: a class is a pass
// (forward or backward), a dtype pair, a bucket of row lengths and a bucket of bytes per call,
// and carries the bounds the build and the runtime match calls against (the runtime never
// buckets itself).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "knob_space.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::tuning {

struct ShapeClass {
    std::string name;  // "bf16_bf16/d4096/b32M", "backward/bf16_bf16/d4096/b32M"
    DType in = DType::f32, out = DType::f32;  // x and y; the backward's x and dy (its dx is x's dtype)
    bool backward = false;
    std::int64_t dim_min = 0, dim_max = 0, bytes_min = 0, bytes_max = 0;
    bool from_memory = false;  // its calls' buffers rotate past the last-level cache
};

struct TuneCase {
    std::string id;    // "pre_norm/bf16_bf16/M1/T16", "pre_norm/bf16_bf16/M1/T16/backward"
    std::string norm;  // the model's norm (SPEC.md's table)
    DType in = DType::f32, out = DType::f32;  // the forward's x and y
    // The backward of the forward call: x, dy (the forward's output dtype) and dx (x's dtype), and
    // the weight gradient, as autograd calls it.
    bool backward = false;
    std::vector<std::int64_t> shape;  // [T, D] or [T, heads, D]
    std::int64_t num_modality = 1;    // M > 1: grouped by sizes, tokens split evenly

    std::int64_t dim() const { return shape.back(); }
    std::int64_t tokens() const { return shape.front(); }
    std::int64_t rows_per_token() const;
    std::int64_t bytes() const;  // input and output bytes of the call: x and y, or x, dy and dx
    std::int64_t elements() const;
};

// SPEC.md's norms (pre-norm, Q/K, mHC to f32 and to bf16, final) with M = 1 and 3 at T in
// `tokens`, in that order; then, `with_backward`, their backwards in the same order.
std::vector<TuneCase> model_cases(const std::vector<std::int64_t> &tokens, bool with_backward);

// The class of a call (bytes from 32 MiB up come from memory).
ShapeClass class_of(DType in, DType out, std::int64_t dim, std::int64_t bytes, bool backward);
ShapeClass class_of(const TuneCase &c);

// The knobs that schedule a class's calls: the forward's GPU knobs (`gpu`), else the backward's
// CPU knobs for a backward class, the forward's for the others.
Scope knob_scope(const ShapeClass &klass, bool gpu);

}  // namespace magi2norm::tuning
