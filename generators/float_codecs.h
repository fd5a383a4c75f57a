// Exact conversions between FP32 and the 16-bit storage formats, as Halide expressions.
//
// BF16 and FP16 tensors reach the pipeline as raw uint16 bits. Doing the conversions here, in
// integer arithmetic (plus one exactly-rounded FP32 add), rather than through Halide's Float(16)
// / BFloat(16) casts makes them independent of the ISA the multi-target library picks at run
// time and of GPU back ends: round-to-nearest-even over the whole range, subnormals included,
// NaN stays NaN, overflow gives +-inf. The one exception is FP16 on x86 targets with F16C,
// whose vcvtph2ps / vcvtps2ph implement exactly these rules (round to nearest even with the
// default MXCSR, subnormals kept) at a fraction of the cost: see f16_codec_is_native.
#pragma once

#include "Halide.h"

namespace magi2norm::algorithm {

// A uint32 constant; plain unsigned literals are ambiguous next to a Halide::Expr.
inline Halide::Expr u32(uint32_t v) { return Halide::Internal::make_const(Halide::UInt(32), v); }

// BF16 bits -> FP32: BF16 is the top half of an FP32.
inline Halide::Expr bf16_to_f32(const Halide::Expr &bits) {
    using namespace Halide;
    return reinterpret<float>(cast<uint32_t>(bits) << 16);
}

// Whether FP16 conversions on `target` use the hardware's (x86 F16C) instead of the integer codec.
inline bool f16_codec_is_native(const Halide::Target &target) {
    return target.arch == Halide::Target::X86 && target.has_feature(Halide::Target::F16C);
}

// FP16 bits -> FP32 with F16C (exact: every FP16 value is an FP32 value).
inline Halide::Expr f16_to_f32_native(const Halide::Expr &bits) {
    using namespace Halide;
    return cast<float>(reinterpret(Float(16), cast<uint16_t>(bits)));
}

// FP32 -> FP16 bits with F16C, round to nearest even.
inline Halide::Expr f32_to_f16_native(const Halide::Expr &value) {
    using namespace Halide;
    return reinterpret<uint16_t>(cast(Float(16), value));
}

// FP16 bits -> FP32, exact for every input (normals, subnormals, +-0, +-inf, NaN payloads).
inline Halide::Expr f16_to_f32(const Halide::Expr &bits) {
    using namespace Halide;
    Expr h = cast<uint32_t>(bits);
    Expr sign = (h & u32(0x8000)) << 16;
    Expr exponent = (h >> 10) & u32(0x1f);
    Expr mantissa = h & u32(0x3ff);
    Expr normal = reinterpret<float>(sign | ((exponent + u32(112)) << 23) | (mantissa << 13));
    Expr inf_or_nan = reinterpret<float>(sign | u32(0x7f800000) | (mantissa << 13));
    // A subnormal is mantissa * 2^-24; the product is an exact FP32 normal (no FTZ hazard).
    // The sign is or-ed in as a bit: Halide's -x is 0 - x, which makes -0 of a negative zero +0.
    Expr magnitude = cast<float>(mantissa) * (1.0f / 16777216.0f);
    Expr subnormal = reinterpret<float>(sign | reinterpret<uint32_t>(magnitude));
    return select(exponent == u32(0), subnormal, exponent == u32(31), inf_or_nan, normal);
}

// The codec's 32-bit constants, plus `zero` when given: an expression that is 0 at run time but
// not to the compiler. LLVM rematerializes literal vector constants, and in the paired-word
// output loop it reloaded them from memory in every iteration; constants computed from a
// run-time zero are computed once before the loop and stay in registers.
inline Halide::Expr codec_const(uint32_t v, const Halide::Expr &zero) { return zero.defined() ? u32(v) + zero : u32(v); }

// Which NaNs an FP32 value handed to the BF16 encoder can be.
enum class NanBits {
    // Any: FP32 and FP16 inputs carry their payloads through the arithmetic, and GPUs write
    // their own canonical NaN (0x7fffffff on NVIDIA).
    any,
    // Only NaNs whose low 16 bits are clear, whose rounding cannot carry out of the low half:
    // the quiet high half they keep is a NaN. A BF16 input's NaNs have a clear low half, and
    // the CPU's arithmetic keeps it so (x86 and ARM propagate an operand's payload, quieted,
    // and make 0xffc00000 / 0x7fc00000 for an invalid operation; FP32 <-> FP64 conversions keep
    // the payload's top bits); the runtime stores every NaN scale as 0x7fc00000 and refuses a
    // NaN eps, so every NaN of the product has a clear low half too.
    low_half_clear,
};

// FP32 -> BF16 as the high half of a uint32 (the low half is not cleared): round to nearest
// even; NaN stays NaN, overflow rounds to inf.
inline Halide::Expr f32_to_bf16_high(const Halide::Expr &value, NanBits nans, const Halide::Expr &zero = Halide::Expr()) {
    using namespace Halide;
    Expr u = reinterpret<uint32_t>(value);
    Expr biased = u + (codec_const(0x7fff, zero) + ((u >> 16) & codec_const(1, zero)));
    if (nans == NanBits::low_half_clear) {
        // Rounding such a NaN keeps its high half: no compare and no select (2 of 13 AVX2
        // operations per 8 lanes of the paired output loop).
        return biased;
    }
    // An unordered compare (one instruction; reliable under strict_float) finds NaN. NaN lanes
    // take all ones before the shift, one select and no payload arithmetic: 0xffff is a NaN,
    // the one PyTorch's vectorized CPU cast writes. Keeping the payload ((u >> 16) | 0x40) would
    // cost two more vector operations per 8 lanes.
    return select(is_nan(value), codec_const(0xffffffff, zero), biased);
}

// FP32 -> BF16 bits, round to nearest even; NaN stays NaN, overflow rounds to inf.
inline Halide::Expr f32_to_bf16(const Halide::Expr &value, NanBits nans) {
    return Halide::cast<uint16_t>(f32_to_bf16_high(value, nans) >> 16);
}

// FP32 -> BF16 bits as f32_to_bf16 gives them, for the AVX-512 BF16 variants: a call that
// cmake/ir_steps.py (--native-bf16) makes the native conversion, with f32_to_bf16's rounding
// for the lanes that conversion does not round as it does (FP32 subnormals; NaN). Halide has no
// native BF16 encoding on x86; the call marks where one goes.
inline Halide::Expr f32_to_bf16_native(const Halide::Expr &value, NanBits nans) {
    const char *name = nans == NanBits::any ? "magi2norm_bf16_rne_nan" : "magi2norm_bf16_rne";
    return Halide::Internal::Call::make(Halide::UInt(16), name, {value}, Halide::Internal::Call::PureExtern);
}

// Two BF16 values stored as one little-endian uint32 word: the element at the even position is
// the low half, the odd one the high half. Decoding a half takes one operation (a shift or a
// mask), with no widening; `odd` is 0 or 1.
inline Halide::Expr bf16_pair_to_f32(const Halide::Expr &word, const Halide::Expr &odd, const Halide::Expr &zero = Halide::Expr()) {
    using namespace Halide;
    return reinterpret<float>(select(odd == 0, word << 16, word & codec_const(0xffff0000, zero)));
}

// The word of two encoded halves (f32_to_bf16_high of the even and the odd element): the odd
// one stays in place, so the pair costs a shift and a merge, with no pack or permute. The mask
// is a literal, not a codec_const: LLVM then sees that the or takes whole 16-bit halves from
// each side and makes the mask and the or one blend (vpblendw on x86, with no constant to keep
// in a register).
inline Halide::Expr bf16_pair(const Halide::Expr &even_high, const Halide::Expr &odd_high) {
    return (even_high >> 16) | (odd_high & u32(0xffff0000));
}

// FP32 -> FP16 bits, round to nearest even over the whole range.
inline Halide::Expr f32_to_f16(const Halide::Expr &value) {
    using namespace Halide;
    Expr u = reinterpret<uint32_t>(value);
    Expr sign = (u >> 16) & u32(0x8000);
    Expr a = u & u32(0x7fffffff);
    // |x| >= 65520 rounds to inf (65504 is the largest finite FP16; the tie goes to even = inf).
    Expr overflow = a >= u32(0x477ff000);
    Expr nan = is_nan(value);
    // Normal results: rebias the exponent, then round the 13 dropped bits to nearest even.
    Expr rebiased = a - u32(0x38000000);
    Expr normal = (rebiased + (u32(0xfff) + ((rebiased >> 13) & u32(1)))) >> 13;
    // Subnormal results (|x| < 2^-14): adding 0.5 puts the value in units of 2^-24 into the low
    // mantissa bits, and the FP32 add performs the round to nearest even exactly.
    Expr shifted = reinterpret<uint32_t>(reinterpret<float>(a) + 0.5f) - u32(0x3f000000);
    Expr magnitude = select(nan, u32(0x7e00),
                            overflow, u32(0x7c00),
                            a < u32(0x38800000), shifted,
                            normal);
    return cast<uint16_t>(sign | magnitude);
}

}  // namespace magi2norm::algorithm
