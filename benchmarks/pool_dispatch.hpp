// The CPU pools measured alone (pool_dispatch.cpp).
#pragma once

namespace magi2norm::bench {

// Registers "pool/<library|halide>/tasks<N>/work<ns>".
void register_pool_benchmarks();

}  // namespace magi2norm::bench
