// The library's own arithmetic (generators/magi2_norm_generator.cpp) written by hand in AVX-512
// intrinsics with AVX512_BF16, so that its output is the library's, bit for bit: the arithmetic
// of peer_hand_avx2.cpp (its header comment) on 16-lane vectors.
//   - Sum of squares: lane l (of 16) of block b adds the FP32 squares at 64 b + l, + 16, + 32,
//     + 48 in FP32, left to right, one vector per step, the lanes in element order; each lane
//     accumulates its partials in FP64 (lanes 0-7 and 8-15 in two vectors); the 16 lane sums are
//     added as lane_tree (l + 8, + 4, + 2, + 1) and rounded to FP32 once.
//   - inv = 1 / sqrt(sum / D + eps) in FP32, y32 = (x * inv) * scale, no multiply-add fused
//     (this file is built with -ffp-contract=off).
//   - BF16 decode: the zero-extended 16 bits shifted up by 16.
//   - BF16 encode: vcvtneps2bf16 (round to nearest even), which differs from the library's
//     integer rule only where it flushes an FP32 subnormal to zero and where it makes its own NaN
//     (the quieted payload's high half). One vfpclassps per 16 lanes finds those lanes (subnormal
//     or NaN); when 64 results have any (one kortestw, a branch, unlikely), those lanes are
//     redone with the library's integer round to nearest even with its rule for BF16 inputs (no
//     NaN test: a BF16 input's NaNs have a clear low half, which the rounding keeps) and blended
//     into the output in memory: stored again over it, a masked vpmovdw per 16 lanes.
// The same cases (rows of a multiple of 64 elements, M = 1, BF16 -> BF16, BF16 -> FP32, FP32 ->
// FP32), threads, parts, chunks and prefetch as peer_hand_avx2.cpp (hand_kernel_common.hpp);
// FP32 stores are 64 bytes, so streaming stores need the output on a 64-byte boundary (the
// workspace's buffers are). Output loops take 64 elements an iteration.
#include <immintrin.h>

#include <cstdint>

#include "hand_kernel_common.hpp"
#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

using namespace hand_kernel;

// vfpclassps categories: QNaN (0x01), denormal (0x20), SNaN (0x80).
constexpr int kSubnormalOrNan = 0x01 | 0x20 | 0x80;

// 16 BF16 or FP32 values -> FP32.
inline __m512 load(const std::uint16_t *p) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

inline __m512 load(const float *p) { return _mm512_loadu_ps(p); }

inline __m512 square(__m512 v) { return _mm512_mul_ps(v, v); }

// Sixteen FP32 partials added into the FP64 lanes 0-7 (`lo`) and 8-15 (`hi`).
inline void accumulate(__m512 partial, __m512d &lo, __m512d &hi) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(partial)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(partial, 1)));
}

// FP64 lane sums 0-7, 8-15 -> the FP32 sum as lane_tree adds them.
inline float lane_tree(__m512d lo, __m512d hi) {
    const __m512d half = _mm512_add_pd(lo, hi);  // l + 8
    const __m256d quarter = _mm256_add_pd(_mm512_castpd512_pd256(half), _mm512_extractf64x4_pd(half, 1));  // l + 4
    const __m128d eighth = _mm_add_pd(_mm256_castpd256_pd128(quarter), _mm256_extractf128_pd(quarter, 1));  // l + 2
    const __m128d sum = _mm_add_sd(eighth, _mm_unpackhi_pd(eighth, eighth));  // l + 1
    return _mm_cvtss_f32(_mm_cvtsd_ss(_mm_setzero_ps(), sum));
}

inline void prefetch_lines(const char *p, int lines) {
    for (int i = 0; i < lines; ++i) _mm_prefetch(p + 64 * i, _MM_HINT_T0);
}

// The library's RNE of FP32 to BF16 for BF16 inputs (f32_to_bf16_high with NanBits::
// low_half_clear, shifted down): the BF16 bits in the low half of each 32-bit lane.
inline __m512i bf16_round_integer(__m512 y) {
    const __m512i u = _mm512_castps_si512(y);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i biased = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd);
    return _mm512_srli_epi32(biased, 16);
}

// Whether any lane of four vectors of FP32 results is one that vcvtneps2bf16 rounds otherwise
// than the library, as masks of those lanes.
inline bool needs_fix_up(const __m512 (&y)[4], __mmask16 (&redo)[4]) {
    for (int k = 0; k < 4; ++k) redo[k] = _mm512_fpclass_ps_mask(y[k], kSubnormalOrNan);
    return !_kortestz_mask16_u8(_kor_mask16(redo[0], redo[1]), _kor_mask16(redo[2], redo[3]));
}

// 16 BF16 results: 32-byte stores (a 64-byte one needs a vinserti64x4 for each).
template <bool kStream>
inline void store(std::uint16_t *p, __m256i v) {
    if constexpr (kStream) {
        _mm256_stream_si256(reinterpret_cast<__m256i *>(p), v);
    } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v);
    }
}

template <bool kStream>
inline void store(float *p, __m512 v) {
    if constexpr (kStream) {
        _mm512_stream_ps(p, v);
    } else {
        _mm512_storeu_ps(p, v);
    }
}

struct Avx512 {
    static constexpr std::int64_t kStreamAlignment = 64;
    static constexpr bool kCopiesScale = false;

    // A row's sum of squares; `ahead` (or null) is prefetched, as many lines as the row reads.
    template <class In>
    static float sum_squares(const In *x, std::int64_t dim, const char *ahead) {
        constexpr std::int64_t kSize = sizeof(In);
        constexpr int kLines = static_cast<int>(kSize * kBlock / 64);  // a block's: 2 of BF16, 4 of FP32
        __m512d lo = _mm512_setzero_pd(), hi = lo;
        for (std::int64_t b = 0; b < dim; b += kBlock) {
            if (ahead) prefetch_lines(ahead + kSize * b, kLines);
            __m512 partial = square(load(x + b));
            for (int k = 1; k < 4; ++k) partial = _mm512_add_ps(partial, square(load(x + b + 16 * k)));
            accumulate(partial, lo, hi);
        }
        return lane_tree(lo, hi);
    }

    // BF16 -> BF16.
    template <bool kStream>
    static void output_row(const std::uint16_t *x, std::uint16_t *y, std::int64_t dim, const float *scale, float inv) {
        const __m512 r = _mm512_set1_ps(inv);
        for (std::int64_t d = 0; d < dim; d += kBlock) {
            __m512 v[4];
            for (int k = 0; k < 4; ++k) {
                v[k] = _mm512_mul_ps(_mm512_mul_ps(load(x + d + 16 * k), r), _mm512_loadu_ps(scale + d + 16 * k));
            }
            for (int k = 0; k < 4; ++k) store<kStream>(y + d + 16 * k, (__m256i)_mm512_cvtneps_pbh(v[k]));
            // The blend is in memory: the lanes to redo are stored again over the vector (a
            // masked vpmovdw each). A blend in registers before one store made the compiler copy
            // every converted vector in the common path.
            __mmask16 redo[4];
            if (__builtin_expect(needs_fix_up(v, redo), 0)) {
                for (int k = 0; k < 4; ++k) _mm512_mask_cvtepi32_storeu_epi16(y + d + 16 * k, redo[k], bf16_round_integer(v[k]));
            }
        }
    }

    // BF16 -> FP32 and FP32 -> FP32.
    template <bool kStream, class In>
    static void output_row(const In *x, float *y, std::int64_t dim, const float *scale, float inv) {
        const __m512 r = _mm512_set1_ps(inv);
        for (std::int64_t d = 0; d < dim; d += kBlock) {
            for (int k = 0; k < 4; ++k) {
                const std::int64_t e = d + 16 * k;
                store<kStream>(y + e, _mm512_mul_ps(_mm512_mul_ps(load(x + e), r), _mm512_loadu_ps(scale + e)));
            }
        }
    }
};

// A candidate arithmetic, not the library's: the canonical FP32 order. Lane l's FP32 block
// partials (as above) are added in FP32 as a complete binary tree over the row's blocks, padded
// with zero blocks to a power of two (a block's partial enters the tree once: a stack of one
// subtree a level, merged as a binary counter carries), then the 16 lanes as lane_tree, in FP32.
// Error bound: (3 + ceil(log2 B) + 4) 2^-24 of the sum for B blocks (D = 12288: 15 2^-24 = 8.9e-7;
// D = 65536: 17 2^-24 = 1.0e-6), against the library's 3.5 2^-24 for any D.
struct Avx512Fp32Tree : Avx512 {
    template <class In>
    static float sum_squares(const In *x, std::int64_t dim, const char *ahead) {
        constexpr std::int64_t kSize = sizeof(In);
        constexpr int kLines = static_cast<int>(kSize * kBlock / 64);
        __m512 level[64];
        std::uint64_t blocks = 0;
        for (std::int64_t b = 0; b < dim; b += kBlock, ++blocks) {
            if (ahead) prefetch_lines(ahead + kSize * b, kLines);
            __m512 partial = square(load(x + b));
            for (int k = 1; k < 4; ++k) partial = _mm512_add_ps(partial, square(load(x + b + 16 * k)));
            int l = 0;
            for (std::uint64_t carry = blocks; carry & 1; carry >>= 1, ++l) partial = _mm512_add_ps(level[l], partial);
            level[l] = partial;
        }
        // The subtrees left, the smallest first: each is the right operand of the next larger.
        __m512 sum = _mm512_setzero_ps();
        bool first = true;
        for (int l = 0; l < 64; ++l) {
            if ((blocks >> l & 1) == 0) continue;
            sum = first ? level[l] : _mm512_add_ps(level[l], sum);
            first = false;
        }
        const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(sum), _mm512_extractf32x8_ps(sum, 1));  // l + 8
        const __m128 quarter = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));  // l + 4
        const __m128 eighth = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));  // l + 2
        return _mm_cvtss_f32(_mm_add_ss(eighth, _mm_movehdup_ps(eighth)));  // l + 1
    }
};

}  // namespace

Implementation hand_avx512_peer() { return kernel_implementation<Avx512>("hand_avx512", hand_avx512_runs_here); }

Implementation hand_avx512_fp32_tree_candidate() {
    return candidate_implementation<Avx512Fp32Tree>("hand_avx512_fp32_tree", hand_avx512_runs_here);
}

}  // namespace magi2norm::bench
