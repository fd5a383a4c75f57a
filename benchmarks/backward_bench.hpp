// The backward's benchmarks (benchmarks/backward.cpp), registered beside the forward's.
#pragma once

namespace magi2norm::bench {

void register_backward_benchmarks();

}  // namespace magi2norm::bench
