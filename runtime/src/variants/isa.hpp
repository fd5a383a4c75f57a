// The instruction sets a variant may need beyond what Halide's run-time pick checks.
#pragma once

#include <cstdint>

namespace magi2norm::detail {

// any: every variant of the multi-target objects (Halide picks their code). avx512_bf16: the
// AVX-512 BF16 variants, compiled for MAGI2NORM_X86_BF16_TARGET (cmake/Magi2normVariants.cmake):
// Zen 4's ISA, which Halide 21's run-time check cannot tell apart.
enum class Isa : std::uint8_t { any, avx512_bf16 };

// Whether this CPU (and its OS, for AVX-512 state) runs code of `isa`: every feature LLVM may
// use for that target, read once.
bool cpu_runs(Isa isa);

}  // namespace magi2norm::detail
