#include "cases.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "model_norms.hpp"

namespace magi2norm::bench {

std::int64_t Case::rows_per_token() const {
    return std::accumulate(row_shape.begin(), row_shape.end() - 1, std::int64_t{1}, std::multiplies<>());
}

std::int64_t Case::elements() const { return tokens * rows_per_token() * dim(); }

std::vector<std::int64_t> Case::shape() const {
    std::vector<std::int64_t> s{tokens};
    s.insert(s.end(), row_shape.begin(), row_shape.end());
    return s;
}

std::vector<std::int64_t> Case::group_sizes() const {
    if (num_modality == 1) return {tokens};
    std::vector<std::int64_t> sizes(num_modality, 0);
    sizes[1] = tokens * 3 / 16;
    sizes[2] = tokens / 16;
    sizes[0] = tokens - sizes[1] - sizes[2];
    return sizes;
}

double Case::bytes_moved() const {
    const auto sizes = group_sizes();
    const auto present = std::count_if(sizes.begin(), sizes.end(), [](std::int64_t n) { return n > 0; });
    const double n = static_cast<double>(elements());
    const double ids = grouping == GroupingKind::ids ? static_cast<double>(tokens) * 4 : 0;  // int32 per token
    return n * static_cast<double>(dtype_size(in) + dtype_size(out)) + static_cast<double>(present * dim() * 4) + ids;
}

std::string Case::name() const {
    std::string grouping_name = "M" + std::to_string(num_modality);
    if (grouping == GroupingKind::sizes) grouping_name += "_sizes";
    if (grouping == GroupingKind::ids) grouping_name += "_ids";
    return norm + "/" + dtype_name(in) + "_" + dtype_name(out) + "/" + grouping_name + "/T" + std::to_string(tokens);
}

std::vector<Case> all_cases() {
    const std::int64_t token_counts[] = {1, 16, 256, 4096, 32768};
    struct Norm {
        std::string name;
        std::vector<std::int64_t> row_shape;
        DType in, out;
        bool multi_modality;  // also measured with M = 3 (SPEC.md: layers 0, 1, 38, 39)
    };
    std::vector<Norm> norms;
    for (const measure::ModelNorm &n : measure::model_norms()) norms.push_back({n.name, n.row, n.x, n.out, n.grouped});
    for (std::int64_t width : {128, 768, 1536}) {
        for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
            norms.push_back({"width" + std::to_string(width), {width}, dtype, dtype, false});
        }
    }

    std::vector<Case> cases;
    for (const Norm &n : norms) {
        std::vector<std::pair<std::int64_t, GroupingKind>> groupings = {{1, GroupingKind::none}};
        if (n.multi_modality) groupings.insert(groupings.end(), {{3, GroupingKind::sizes}, {3, GroupingKind::ids}});
        for (const auto &[modalities, grouping] : groupings) {
            for (std::int64_t tokens : token_counts) {
                cases.push_back({n.name, n.row_shape, n.in, n.out, tokens, modalities, grouping});
            }
        }
    }
    // The pre-norm from memory between the two largest counts, where the hand-written bar
    // (benchmarks/peer_hand_avx2.cpp, docs/benchmarks/hand_kernel.md) is also measured.
    cases.push_back({"pre_norm", {3072}, DType::bf16, DType::bf16, 16384, 1, GroupingKind::none});
    return cases;
}

}  // namespace magi2norm::bench
