// The interface between the backward's algorithm (generators/magi2_norm_backward_generator.cpp)
// and its schedule: the stages of one backward pipeline and the run-time facts a schedule may
// specialize on. The algorithm fills this in; a schedule only reorders, splits, vectorizes and
// places stages.
#pragma once

#include "Halide.h"

namespace magi2norm::schedules {

struct BackwardStages {
    // The output axes, innermost first, as the forward's (norm_stages.h): d, h (pattern or head),
    // a (other middle axis), t (token); `blk` is a block of `block_tokens` tokens, on CPUs in
    // tiles (`tile`) of groups (`grp`) of tokens.
    Halide::Var d{"d"}, h{"h"}, a{"a"}, t{"t"}, lane{"lane"}, blk{"blk"}, tile{"tile"}, grp{"grp"};

    Halide::Func dx;              // dx(d, h, a, t): the cast input gradient, an output (CPUs: an
                                  // update over dx_tokens, fused with the partials at the tile)
    Halide::Func dx_summed;       // (d, h, a, t) FP32: the K rows of one input row added (K > 1)
    Halide::Func partials;        // partials(d, p, blk), FP64: sum over the block's rows of dy * n, an output
    Halide::RDom partial_terms;   // (head of the pattern, middle axis, token of the block or group)
    Halide::Func group_sum;       // CPUs: group_sum(d, p, grp, tile, blk), FP32: sum over the group's rows of dy * n
    Halide::RDom partial_groups;  // CPUs: (group of the tile, tile, block): the groups the partials add
    Halide::RDom dx_tokens;       // CPUs: (token of the tile, tile, block): the tokens dx writes
    Halide::Func sum_squares, sum_squares_lanes;  // (h, a, t): the forward's row sum, and its CPU lanes;
                                                  // on CPUs a Tuple {sum_d x^2, sum_d g * x}
    Halide::Func sum_gx;                          // GPUs: (h, a, t) sum_d g * x, the same row sum
    Halide::Func inv_rms;                         // (h, a, t)
    Halide::Func mean_gn;                         // (h, a, t): inv * sum_d g * x / D
    Halide::RDom sum_squares_blocks, sum_gx_blocks;  // the row sums' (lane, block) on GPUs

    Halide::Expr block_tokens;      // tokens per partial block (the runtime's, thread-count free)
    Halide::Expr heads_per_dx_row;  // K: output rows per input row (singleton-head broadcasting)
    Halide::Expr dim;               // D
    int dx_bytes = 4;               // bytes per dx element
};

}  // namespace magi2norm::schedules
