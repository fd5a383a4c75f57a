// The cases the suite measures: every norm of the MAGI-2 Preview table (SPEC.md), with one and
// three modalities, at token counts from decode-like to long video; plus plain [T, D] norms of
// other widths in each dtype.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::bench {

enum class GroupingKind { none, sizes, ids };

struct Case {
    std::string norm;                     // "pre_norm", "qk_norm", "mhc_norm", "final_norm", "width128", ...
    std::vector<std::int64_t> row_shape;  // the input's shape after the token axis: {3072} or {24, 128}
    DType in = DType::bf16, out = DType::bf16;
    std::int64_t tokens = 1;              // T
    std::int64_t num_modality = 1;        // M (P is always 1 here)
    GroupingKind grouping = GroupingKind::none;

    std::int64_t dim() const { return row_shape.back(); }
    // Normalized rows per token (the heads of the Q/K norm, else 1).
    std::int64_t rows_per_token() const;
    std::int64_t elements() const;
    std::vector<std::int64_t> shape() const;  // {T, row_shape...}
    // Tokens per modality, in modality order: 3/4 video, 3/16 audio, 1/16 text for M = 3.
    std::vector<std::int64_t> group_sizes() const;
    // Bytes an ideal implementation moves: input read once, output written once, the FP32
    // scale rows of the modalities present, and the int32 ids when grouping by ids.
    double bytes_moved() const;
    // "<norm>/<in>_<out>/<M1|M3_sizes|M3_ids>/T<tokens>": the report parses this.
    std::string name() const;
};

std::vector<Case> all_cases();

}  // namespace magi2norm::bench
