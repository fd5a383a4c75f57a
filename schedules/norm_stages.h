// The interface between the algorithm (generators/) and its schedules (schedules/): the stages
// of one norm pipeline, its loop variables, and the run-time facts a schedule may specialize on.
// The algorithm fills this in; a schedule only reorders, splits, vectorizes and places stages.
#pragma once

#include "Halide.h"
#include "kernel_abi.h"

namespace magi2norm::schedules {

struct NormStages {
    // Loop variables of the output, innermost first: d (normalized axis), h (pattern / head
    // axis, selects the scale row), a (any other middle axis), t (token axis, selects modality).
    Halide::Var d{"d"}, h{"h"}, a{"a"}, t{"t"};

    Halide::Func output;       // out(d, h, a, t): the cast result, the pipeline's output
    Halide::Func sum_squares;  // (h, a, t): FP64 sum of FP32 partials, each of `sum_steps`
                               // squares (zero past the row's end); on GPUs an update over
                               // `blocks`, on CPUs a pure tree over `lane_sums`
    Halide::Func lane_sums;    // CPUs: (lane, h, a, t), or (lane, odd, h, a, t) for paired
                               // words: each lane's FP64 sum, an update over `blocks`
    Halide::Var lane{"lane"}, odd{"odd"};  // lane_sums' lane variables (odd: paired words)
    Halide::Func inv_rms;      // (h, a, t): 1 / sqrt(mean square + eps)
    Halide::Func inverse_rms;  // (h, a, t): inv_rms as the training form's second output;
                               // undefined in the other forms
    Halide::Func modality;     // (t): the scale block of token t
    Halide::RDom blocks;       // the blocks that cover the normalized axis: (lane, block) on
                               // GPUs, (block) for the CPUs' lane_sums
    int sum_steps = 0;         // squares per partial, set by the algorithm; lane l of block b
                               // adds squares at b * (16 * sum_steps) + l + 16 k, k < sum_steps
    // The paired-word form (BF16 -> BF16): x and out are uint32 words of two elements, d counts
    // words, and each row is a whole number of 8-word (16-element) vectors.
    bool paired_words = false;
    static constexpr int kWordsPerVector = abi::kSumLanes / 2;
    bool one_row = false;  // one dense row, every outer extent 1 (the one-row form)
    Halide::ImageParam input;  // x(d, h, a, t), the pipeline's input, for prefetch directives

    Halide::Expr dim;               // D
    Halide::Expr x_inner_stride;    // element stride of x along d
    Halide::Expr out_inner_stride;  // element stride of out along d
    int in_bytes = 4;               // bytes per input element
    int out_bytes = 4;              // bytes per output element
};

}  // namespace magi2norm::schedules
