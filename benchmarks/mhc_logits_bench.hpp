// The mHC logits' benchmarks (benchmarks/mhc_logits.cpp), registered beside the norm's.
#pragma once

namespace magi2norm::bench {

void register_mhc_logits_benchmarks();

}  // namespace magi2norm::bench
