// The calls a tuning run measures, and the shape classes that group them: a class is a dtype
// pair, a bucket of row lengths and a bucket of bytes per call, and carries the bounds the build
// and the runtime match calls against (the runtime never buckets itself).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::tuning {

struct ShapeClass {
    std::string name;  // "bf16_bf16/d4096/b32M"
    DType in = DType::f32, out = DType::f32;
    std::int64_t dim_min = 0, dim_max = 0, bytes_min = 0, bytes_max = 0;
    bool from_memory = false;  // its calls' buffers rotate past the last-level cache
};

struct TuneCase {
    std::string id;    // "pre_norm/bf16_bf16/M1/T16"
    std::string norm;  // the model's norm (SPEC.md's table)
    DType in = DType::f32, out = DType::f32;
    std::vector<std::int64_t> shape;  // [T, D] or [T, heads, D]
    std::int64_t num_modality = 1;    // M > 1: grouped by sizes, tokens split evenly

    std::int64_t dim() const { return shape.back(); }
    std::int64_t tokens() const { return shape.front(); }
    std::int64_t rows_per_token() const;
    std::int64_t bytes() const;  // input and output bytes of the call
};

// SPEC.md's norms (pre-norm, Q/K, mHC to f32 and to bf16, final) with M = 1 and 3 at T in
// `tokens`, in that order.
std::vector<TuneCase> model_cases(const std::vector<std::int64_t> &tokens);

// The class of a call (bytes from 32 MiB up come from memory).
ShapeClass class_of(DType in, DType out, std::int64_t dim, std::int64_t bytes);
ShapeClass class_of(const TuneCase &c);

}  // namespace magi2norm::tuning
