// How fast this machine multiplies and adds in FP64, measured in this process: the arithmetic
// limit of the mHC logits' product (exact FP64 products added in FP64), which its rate is a
// fraction of, as a memory-bound norm's is of the copy ceilings.
#pragma once

namespace magi2norm::measure {

// FP64 fused multiply-adds per second (lanes, not instructions) of `threads` threads, each
// running twelve independent chains of the widest FMA vector this CPU has (AVX-512, else AVX2,
// else scalar multiply and add); best of 3 runs of about 0.1 s. Measured on first use; the same
// number for the rest of the process.
double fp64_fma_rate(int threads);

}  // namespace magi2norm::measure
