// The interface between the backward's algorithm (generators/magi2_norm_backward_generator.cpp)
// and its schedule: the stages of one backward pipeline and the run-time facts a schedule may
// specialize on. The algorithm fills this in; a schedule only reorders, splits, vectorizes and
// places stages.
#pragma once

#include "Halide.h"

namespace magi2norm::schedules {

struct BackwardStages {
    // The output axes, innermost first, as the forward's (norm_stages.h): d, h (pattern or head),
    // a (other middle axis), t (token); `blk` is a block of `block_tokens` tokens.
    Halide::Var d{"d"}, h{"h"}, a{"a"}, t{"t"}, lane{"lane"}, blk{"blk"};

    Halide::Func dx;              // dx(d, h, a, t): the cast input gradient, an output (CPUs: an
                                  // update over dx_terms, which the schedule may fuse with the partials)
    Halide::Func dx_summed;       // (d, h, a, t) FP32: the K rows of one input row added (K > 1)
    Halide::Func partials;        // partials(d, p, blk): sum over the block's rows of dy * n, an output
                                  // (GPUs: FP64; CPUs: FP32)
    Halide::RDom partial_terms;   // GPUs: (head of the pattern, middle axis, token of the block);
                                  // CPUs: (head, middle axis, token of the tile, tile, task)
    Halide::RDom dx_terms;        // CPUs: (dx row, middle axis, token of the tile, tile, task)
    Halide::Func sum_squares, sum_squares_lanes;  // (h, a, t): the forward's row sum, and its lanes;
                                                  // on CPUs a Tuple {sum_d x^2, sum_d g * x}
    Halide::Func sum_gx, sum_gx_lanes;            // (h, a, t) sum_d g * x, the same row sum; on CPUs
                                                  // the pass-1 sum alone, with the inverse RMS given
    Halide::Func inv_rms;                         // (h, a, t)
    Halide::Func mean_gn;                         // (h, a, t): inv * sum_d g * x / D
    Halide::Func nonfinite_terms;                 // (h, a, t): elements of infinite x or g, counted
                                                  // for rows of inv = 0 only (mean_gn's select)
    Halide::RDom sum_squares_blocks, sum_gx_blocks;  // the row sums' blocks

    Halide::Expr block_tokens;      // tokens per partial block (the runtime's, thread-count free)
    Halide::Expr heads_per_dx_row;  // K: output rows per input row (singleton-head broadcasting)
    Halide::Expr dim;               // D
    bool whole_vectors = false;     // CPUs: rows are whole vectors (the streaming-store variants)
};

}  // namespace magi2norm::schedules
