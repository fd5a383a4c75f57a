// The demo's workload: the norms of the MAGI-2 Preview model (SPEC.md's table) on synthetic data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::cli {

// Every case has num_patterns = 1, so one scale row (that of the token's modality) serves every
// row of a token and the output has the input's shape.
struct DemoCase {
    std::string name;
    std::vector<std::int64_t> shape;  // [T, ..., D]
    DType in_dtype, out_dtype, weight_dtype;
    std::int64_t num_modality;
    Grouping::Kind grouping;
    float eps = 1e-6f;
};

std::vector<DemoCase> model_cases(std::int64_t tokens);

// Random inputs of one case: x and the weight never zero, the grouping consistent with T.
struct DemoData {
    std::vector<unsigned char> x, weight;
    std::vector<std::int32_t> ids;     // grouping by ids: one id per token, unsorted
    std::vector<std::int64_t> sizes;   // grouping by sizes

    ConstTensorView x_view(const DemoCase &c) const { return {x.data(), c.in_dtype, c.shape}; }
    ConstTensorView weight_view(const DemoCase &c) const {
        return {weight.data(), c.weight_dtype, {c.num_modality * c.shape.back()}};
    }
    Grouping grouping(const DemoCase &c) const;
    // The modality of token t.
    std::int64_t modality(std::int64_t token) const;
};

DemoData make_demo_data(const DemoCase &c, std::uint64_t seed);

const char *grouping_name(Grouping::Kind kind);

}  // namespace magi2norm::cli
