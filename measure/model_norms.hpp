// The MAGI-2 model's norms (model_norms.def), the cases every benchmark, the tuner and the demo
// run, named alike everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::measure {

struct ModelNorm {
    std::string name;               // pre_norm, qk_norm, mhc_norm or final_norm
    DType x, out;                   // the input's and the output's dtypes (the backward's dy is out)
    bool grouped;                   // also run with M = 3 modalities
    std::vector<std::int64_t> row;  // a token's shape: the axes after the token axis
    // "name/x_out", as every table names the case.
    std::string label() const { return name + "/" + dtype_name(x) + "_" + dtype_name(out); }
};

inline const std::vector<ModelNorm> &model_norms() {
    static const std::vector<ModelNorm> norms = {
#define MAGI2NORM_MODEL_NORM(name, x, out, grouped, ...) {#name, DType::x, DType::out, grouped, {__VA_ARGS__}},
#include "model_norms.def"
    };
    return norms;
}

}  // namespace magi2norm::measure
