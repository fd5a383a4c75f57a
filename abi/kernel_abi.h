// What the generated variants and the runtime that calls them agree on, defined once. Plain C++:
// the runtime includes it too.
#pragma once

namespace magi2norm::abi {

// Grouping by sizes reaches a variant as the scalar group starts cu[1 .. kMaxGroups - 1], so it
// covers up to this many modalities without a buffer (a GPU launch then copies nothing).
constexpr int kMaxGroups = 16;

// Lanes of the sum of squares' FP32 partials: lane l adds the squares at positions l, l + 16, ...
// of its block. The paired-word form covers a row in blocks of this many positions, so its rows
// are whole blocks and the runtime permutes its scale table within each block.
constexpr int kSumLanes = 16;

// Terms in one lane's FP32 partial of a block (a block is kSumLanes * kSumSteps positions), on
// every target: the order of the row sums, and so the output bits, is this and kSumLanes alone.
constexpr int kSumSteps = 4;

// Chains of the mHC logits' product (magi2_mhc_logits): chain k adds, in FP64 and in order of d,
// the exact products y32[d] * phi[d, j] at d = k, k + 4, k + 8, ...; the chains are then added
// as (0 + 1) + (2 + 3) and rounded to FP32 once. Independent chains let a CPU keep its FMA units
// busy without a reordering of its own; the order, and so the bits, is this alone.
constexpr int kLogitChains = 4;

}  // namespace magi2norm::abi
