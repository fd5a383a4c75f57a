// What the backward's generated variants and the runtime that calls them agree on, defined once.
// Plain C++: the runtime includes it too.
#pragma once

namespace magi2norm::abi {

// Products in one FP32 partial of the weight gradient on CPUs: a block of the partials holds
// max(1, kPartialTerms / R) tokens, R the products a token adds to one scale row (heads a
// pattern x middle rows). Its sum errs by at most (64 - 1) 2^-24 = 3.8e-6 of the products'
// magnitudes, within B2's 1e-5 with the other errors (docs/backward.md).
constexpr int kPartialTerms = 64;

// The CPU streaming-store variants take rows of a multiple of this many elements (the widest
// FP32 vector, AVX-512's), so that their vector loops have no tail.
constexpr int kStreamingLanes = 16;

}  // namespace magi2norm::abi
