#include "isa.hpp"

#include "HalideRuntime.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace magi2norm::detail {

namespace {

#if defined(__x86_64__)
bool has_bits(unsigned value, std::uint32_t bits) { return (value & bits) == bits; }

// The features of LLVM's znver4, which the AVX-512 BF16 variants are compiled for, that code may
// use: every AVX-512 extension Zen 4 has and the scalar and vector extensions besides, from
// CPUID; and the OS saving the AVX-512 state (XCR0: SSE, AVX, opmask and both ZMM halves).
bool runs_avx512_bf16() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    // FMA, MOVBE, POPCNT, OSXSAVE, AVX, F16C.
    if (!has_bits(c, (1u << 12) | (1u << 22) | (1u << 23) | (1u << 27) | (1u << 28) | (1u << 29))) return false;
    unsigned xcr0_low = 0, xcr0_high = 0;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    if (!has_bits(xcr0_low, 0xe6)) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    // BMI1, AVX2, BMI2, AVX512F, AVX512DQ, ADX, AVX512IFMA, AVX512CD, AVX512BW, AVX512VL.
    if (!has_bits(b, (1u << 3) | (1u << 5) | (1u << 8) | (1u << 16) | (1u << 17) | (1u << 19) | (1u << 21) | (1u << 28) |
                         (1u << 30) | (1u << 31))) {
        return false;
    }
    // AVX512VBMI, AVX512VBMI2, GFNI, VAES, VPCLMULQDQ, AVX512VNNI, AVX512BITALG, AVX512VPOPCNTDQ.
    if (!has_bits(c, (1u << 1) | (1u << 6) | (1u << 8) | (1u << 9) | (1u << 10) | (1u << 11) | (1u << 12) | (1u << 14))) {
        return false;
    }
    // AVX512_BF16.
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !has_bits(a, 1u << 5)) return false;
    // LZCNT.
    return __get_cpuid(0x80000001, &a, &b, &c, &d) && has_bits(c, 1u << 5);
}
#else
bool runs_avx512_bf16() { return false; }
#endif

// Whether Halide's run-time pick would take code of the target's Halide features: it asks the
// same question of its multi-target objects, and a host (or a test, for the baseline code) may
// have answered it (halide_set_custom_can_use_target_features).
bool halide_allows_avx512_bf16() {
    constexpr int kWords = (halide_target_feature_end + 63) / 64;
    std::uint64_t features[kWords] = {};
    for (const halide_target_feature_t f :
         {halide_target_feature_sse41, halide_target_feature_avx, halide_target_feature_avx2, halide_target_feature_fma,
          halide_target_feature_f16c, halide_target_feature_avx512, halide_target_feature_avx512_skylake,
          halide_target_feature_avx512_cannonlake, halide_target_feature_avx512_zen4}) {
        features[f / 64] |= std::uint64_t{1} << (f % 64);
    }
    return halide_can_use_target_features(kWords, features) != 0;
}

}  // namespace

bool cpu_runs(Isa isa) {
    static const bool avx512_bf16 = runs_avx512_bf16() && halide_allows_avx512_bf16();
    return isa == Isa::any || avx512_bf16;
}

}  // namespace magi2norm::detail
