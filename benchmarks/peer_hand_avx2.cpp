// The bar a tuned build is held to: the library's own arithmetic (generators/magi2_norm_generator.cpp)
// written by hand in AVX2 intrinsics, so that its output is the library's, bit for bit.
//   - Sum of squares: lane l (of 16) of block b adds the FP32 squares at 64 b + l, + 16, + 32, + 48
//     in FP32, left to right; each lane accumulates its partials in FP64; the 16 lane sums are
//     added as the generator's lane_tree (l + 8, + 4, + 2, + 1) and rounded to FP32 once.
//   - inv = 1 / sqrt(sum / D + eps) in FP32, y32 = (x * inv) * scale, RNE to BF16 with the
//     generator's rule for BF16 inputs (no NaN test: their NaNs have a clear low half).
//   - No multiply-add is fused: every FMA would change the result (this file is built with
//     -ffp-contract=off, so the compiler fuses none either; FMA and F16C are enabled, unused).
// Rows of a multiple of 64 elements, one modality and one scale row (M = 1, P = 1), the model's
// dtype pairs BF16 -> BF16, BF16 -> FP32 and FP32 -> FP32. Two threads (the caller and one
// persistent worker) claim parts of about 64 KiB of input (1 MiB from memory; at least two from
// 32 KiB), as the library's defaults split its tasks (cpu_task_bytes, cpu_memory_task_bytes,
// cpu_split_bytes). A part's rows go in chunks of about 16 KiB of input whose sums come before
// their outputs; calls of 4 MiB of input or more prefetch the next chunk while summing this one,
// and outputs of 4 MiB or more on 32-byte boundaries take streaming stores (the library's
// cpu_prefetch_bytes and StreamingPolicy::min_output_bytes).
// This file holds the vector code; the rest (the cases covered, the split into parts and chunks,
// the two-thread pool, the runner, and the check, before timing, that the output is the library's
// bit for bit on random data and on rows of special values) is hand_kernel_common.hpp's, shared
// with peer_hand_avx512.cpp.
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "hand_kernel_common.hpp"
#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

using namespace hand_kernel;

// FP64 lane sums [0..3], [4..7], [8..11], [12..15] -> the FP32 sum as lane_tree adds them.
inline float lane_tree(__m256d s0, __m256d s1, __m256d s2, __m256d s3) {
    const __m256d half = _mm256_add_pd(_mm256_add_pd(s0, s2), _mm256_add_pd(s1, s3));  // l + 8, then l + 4
    const __m128d quarter = _mm_add_pd(_mm256_castpd256_pd128(half), _mm256_extractf128_pd(half, 1));  // l + 2
    const __m128d sum = _mm_add_sd(quarter, _mm_unpackhi_pd(quarter, quarter));  // l + 1
    return _mm_cvtss_f32(_mm_cvtsd_ss(_mm_setzero_ps(), sum));
}

// Four FP32 partials (lanes in the order `lo` and `hi` hold them) added into the FP64 lanes.
inline void accumulate(__m256 lo, __m256 hi, __m256d &a, __m256d &b, __m256d &c, __m256d &d) {
    a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm256_castps256_ps128(lo)));
    b = _mm256_add_pd(b, _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)));
    c = _mm256_add_pd(c, _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
    d = _mm256_add_pd(d, _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
}

inline __m256 square(__m256 v) { return _mm256_mul_ps(v, v); }

// BF16 -> FP32 of 16 elements in one register, within 128-bit halves: `lo` holds elements
// 0-3 and 8-11, `hi` 4-7 and 12-15 (one unpack each, no cross-lane move).
inline __m256 bf16_lo(__m256i v) { return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v)); }
inline __m256 bf16_hi(__m256i v) { return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v)); }

inline void prefetch_lines(const char *p, int lines) {
    for (int i = 0; i < lines; ++i) _mm_prefetch(p + 64 * i, _MM_HINT_T0);
}

// RNE of FP32 to BF16 in the high half of each 32-bit lane, shifted down.
inline __m256i bf16_round(__m256 y) {
    const __m256i u = _mm256_castps_si256(y);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
}

template <bool kStream>
inline void store(void *p, __m256i v) {
    if constexpr (kStream) {
        _mm256_stream_si256(static_cast<__m256i *>(p), v);
    } else {
        _mm256_storeu_si256(static_cast<__m256i *>(p), v);
    }
}

template <bool kStream>
inline void store(float *p, __m256 v) {
    if constexpr (kStream) {
        _mm256_stream_ps(p, v);
    } else {
        _mm256_storeu_ps(p, v);
    }
}

// The row kernels that hand_kernel::norm_rows calls. The sums are defined out of the class, so
// not inline: each stays one function, called by the two norm_rows of its input type (ordinary
// and streaming stores).
struct Avx2 {
    static constexpr std::int64_t kStreamAlignment = 32;
    static constexpr bool kCopiesScale = true;

    // The scale as output_row reads it: for BF16 outputs, as the unpacked halves hold the
    // elements (per 16, elements 0-3 and 8-11, then 4-7 and 12-15); else in element order.
    static std::vector<float> copy_scale(const float *scale, std::int64_t dim, DType out) {
        std::vector<float> copy(scale, scale + dim);
        if (out == DType::bf16) {
            for (std::int64_t d = 0; d < dim; d += 16) {
                for (int i = 0; i < 8; ++i) {
                    const int lo = i < 4 ? i : i + 4;
                    copy[d + i] = scale[d + lo];
                    copy[d + 8 + i] = scale[d + lo + 4];
                }
            }
        }
        return copy;
    }

    static float sum_squares(const std::uint16_t *x, std::int64_t dim, const char *ahead);
    static float sum_squares(const float *x, std::int64_t dim, const char *ahead);

    // BF16 -> BF16: `scale` is in copy_scale's order.
    template <bool kStream>
    static void output_row(const std::uint16_t *x, std::uint16_t *y, std::int64_t dim, const float *scale, float inv) {
        const __m256 r = _mm256_set1_ps(inv);
        for (std::int64_t d = 0; d < dim; d += 16) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + d));
            const __m256 lo = _mm256_mul_ps(_mm256_mul_ps(bf16_lo(v), r), _mm256_loadu_ps(scale + d));
            const __m256 hi = _mm256_mul_ps(_mm256_mul_ps(bf16_hi(v), r), _mm256_loadu_ps(scale + d + 8));
            // packus takes 128-bit halves in turn: lo's 0-3, hi's 4-7, lo's 8-11, hi's 12-15.
            store<kStream>(y + d, _mm256_packus_epi32(bf16_round(lo), bf16_round(hi)));
        }
    }

    // BF16 -> FP32, in element order.
    template <bool kStream>
    static void output_row(const std::uint16_t *x, float *y, std::int64_t dim, const float *scale, float inv) {
        const __m256 r = _mm256_set1_ps(inv);
        for (std::int64_t d = 0; d < dim; d += 8) {
            const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x + d)));
            const __m256 xf = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
            store<kStream>(y + d, _mm256_mul_ps(_mm256_mul_ps(xf, r), _mm256_loadu_ps(scale + d)));
        }
    }

    // FP32 -> FP32.
    template <bool kStream>
    static void output_row(const float *x, float *y, std::int64_t dim, const float *scale, float inv) {
        const __m256 r = _mm256_set1_ps(inv);
        for (std::int64_t d = 0; d < dim; d += 8) {
            store<kStream>(y + d, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + d), r), _mm256_loadu_ps(scale + d)));
        }
    }
};

// A BF16 row's sum of squares. With unpacked halves, lo of block b's four loads holds lanes
// 0-3 and 8-11 and hi lanes 4-7 and 12-15, each paired with its own +16, +32, +48 elements.
// `ahead` (or null) is prefetched, as many lines as the row reads.
float Avx2::sum_squares(const std::uint16_t *x, std::int64_t dim, const char *ahead) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (std::int64_t b = 0; b < dim; b += kBlock) {
        if (ahead) prefetch_lines(ahead + 2 * b, 2);
        const auto *p = reinterpret_cast<const __m256i *>(x + b);
        const __m256i v0 = _mm256_loadu_si256(p), v1 = _mm256_loadu_si256(p + 1);
        const __m256i v2 = _mm256_loadu_si256(p + 2), v3 = _mm256_loadu_si256(p + 3);
        __m256 lo = square(bf16_lo(v0)), hi = square(bf16_hi(v0));
        lo = _mm256_add_ps(lo, square(bf16_lo(v1)));
        hi = _mm256_add_ps(hi, square(bf16_hi(v1)));
        lo = _mm256_add_ps(lo, square(bf16_lo(v2)));
        hi = _mm256_add_ps(hi, square(bf16_hi(v2)));
        lo = _mm256_add_ps(lo, square(bf16_lo(v3)));
        hi = _mm256_add_ps(hi, square(bf16_hi(v3)));
        // lo: lanes 0-3 | 8-11, hi: 4-7 | 12-15.
        accumulate(lo, hi, s0, s2, s1, s3);
    }
    return lane_tree(s0, s1, s2, s3);
}

// An FP32 row's: lanes 0-7 in `lo`, 8-15 in `hi`.
float Avx2::sum_squares(const float *x, std::int64_t dim, const char *ahead) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (std::int64_t b = 0; b < dim; b += kBlock) {
        if (ahead) prefetch_lines(ahead + 4 * b, 4);
        const float *p = x + b;
        __m256 lo = square(_mm256_loadu_ps(p)), hi = square(_mm256_loadu_ps(p + 8));
        for (int k = 1; k < 4; ++k) {
            lo = _mm256_add_ps(lo, square(_mm256_loadu_ps(p + 16 * k)));
            hi = _mm256_add_ps(hi, square(_mm256_loadu_ps(p + 16 * k + 8)));
        }
        accumulate(lo, hi, s0, s1, s2, s3);
    }
    return lane_tree(s0, s1, s2, s3);
}

}  // namespace

Implementation hand_avx2_peer() {
    return kernel_implementation<Avx2>("hand_avx2", [] { return __builtin_cpu_supports("avx2") != 0; });
}

}  // namespace magi2norm::bench
