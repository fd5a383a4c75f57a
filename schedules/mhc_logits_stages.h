// The interface between the mHC logits' algorithm (generators/magi2_mhc_logits_generator.cpp)
// and its schedules: the stages of one pipeline, its loop variables, and the run-time facts a
// schedule may specialize on. The row sums are the norm's (norm_pieces.h's row_sum), so a
// schedule places them as the norm's schedules do.
#pragma once

#include "Halide.h"
#include "kernel_abi.h"

namespace magi2norm::schedules {

struct MhcLogitsStages {
    // d: the normalized axis (S*C), t: tokens, j: the logits' columns (N), chain: the product's
    // FP64 partial sums (abi::kLogitChains), lane: the sum of squares' lanes.
    Halide::Var d{"d"}, t{"t"}, j{"j"}, chain{"chain"}, lane{"lane"};
    // h and a of the norm's row sums (extent 1 here).
    Halide::Var h{"h"}, a{"a"};

    Halide::Func logits;       // (j, t): the pipeline's output, FP32
    Halide::Func inverse_rms;  // (t): the second output, the norm forward's inverse RMS bit for bit
    Halide::Func lane_sums;    // (lane, h, a, t): the sum of squares' FP64 lanes, an update over `blocks`
    Halide::Func sum_squares;  // (h, a, t): their tree
    Halide::Func inv_rms;      // (t): 1 / sqrt(mean square + eps)
    Halide::Func modality;     // (t): the scale block of token t
    Halide::Func y32;          // (d, t): the norm's FP32 output, never stored
    Halide::Func y64, phi64;   // (d, t), (d, j): y32 and phi widened to FP64 (exact), zero past D
    Halide::Func chains;       // (chain, j, t): FP64 partial products, an update over `steps`
    Halide::RDom blocks;       // the sum of squares' blocks
    Halide::RDom steps;        // one chain's products: d = chain + kLogitChains * steps

    Halide::Expr dim;          // D
    Halide::Expr columns;      // N
    Halide::Expr x_inner_stride;
    Halide::Expr phi_column_stride;  // element stride of phi along j (1 for a row-major [D, N])
    int in_bytes = 4;
};

// The backward's stages (generators/magi2_mhc_logits_backward_generator.cpp).
struct MhcLogitsBackwardStages {
    Halide::Var d{"d"}, t{"t"}, j{"j"};

    Halide::Func dy;        // (d, t): the output's gradient for the norm's backward, FP32
    Halide::Func dphi;      // (j, d): phi's gradient, FP32
    Halide::Func dy_sum;    // (d, t): FP64, an update over `over_columns`
    Halide::Func dphi_sum;  // (j, d): FP64, an update over `over_tokens`
    Halide::Func y64;       // (d, t): the forward's normalized row, widened (exact)
    Halide::Func g64, phi64;  // (j, t), (d, j): G and phi widened (exact)
    Halide::Func modality;  // (t)
    Halide::RDom over_columns, over_tokens;

    Halide::Expr dim, columns, tokens;
    Halide::Expr phi_column_stride;
};

}  // namespace magi2norm::schedules
