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
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

constexpr std::int64_t kBlock = 64;                    // 16 lanes x sum_steps 4
constexpr std::int64_t kSplitBytes = 32 * 1024;        // from here, at least two parts
constexpr std::int64_t kPartBytes = 64 * 1024;         // input bytes a part (1 MiB from memory)
constexpr std::int64_t kMemoryPartBytes = 1 << 20;
constexpr std::int64_t kChunkBytes = 16 * 1024;        // input rows whose sums come first
constexpr std::int64_t kFromMemoryBytes = 4 << 20;     // prefetch, and stream outputs, from here
constexpr std::int64_t kStreamAlignment = 32;
constexpr int kThreads = 2;
// How long an idle worker polls before it sleeps: about as long as Halide's pool workers yield
// (40 sched_yield calls) before they wait on a condition variable.
constexpr std::chrono::microseconds kSpin{50};

// One call's rows as the kernel sees them.
struct Rows {
    const void *x;
    void *out;
    std::int64_t dim;
    const float *scale;  // the row's scale, in the order the output loop reads it
    float eps;
    bool prefetch, stream;
};

// FP64 lane sums [0..3], [4..7], [8..11], [12..15] -> the FP32 sum as lane_tree adds them.
inline float lane_tree(__m256d s0, __m256d s1, __m256d s2, __m256d s3) {
    const __m256d half = _mm256_add_pd(_mm256_add_pd(s0, s2), _mm256_add_pd(s1, s3));  // l + 8, then l + 4
    const __m128d quarter = _mm_add_pd(_mm256_castpd256_pd128(half), _mm256_extractf128_pd(half, 1));  // l + 2
    const __m128d sum = _mm_add_sd(quarter, _mm_unpackhi_pd(quarter, quarter));  // l + 1
    return _mm_cvtss_f32(_mm_cvtsd_ss(_mm_setzero_ps(), sum));
}

inline float inverse_rms(float sum, std::int64_t dim, float eps) {
    const float mean = sum / static_cast<float>(dim) + eps;
    return 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean)));
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

// A BF16 row's sum of squares. With unpacked halves, lo of block b's four loads holds lanes
// 0-3 and 8-11 and hi lanes 4-7 and 12-15, each paired with its own +16, +32, +48 elements.
// `ahead` (or null) is prefetched, as many lines as the row reads.
float sum_squares(const std::uint16_t *x, std::int64_t dim, const char *ahead) {
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
float sum_squares(const float *x, std::int64_t dim, const char *ahead) {
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

// BF16 -> BF16: `scale` is permuted as the unpacked halves hold the elements (scale_order).
template <bool kStream>
void output_row(const std::uint16_t *x, std::uint16_t *y, std::int64_t dim, const float *scale, float inv) {
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
void output_row(const std::uint16_t *x, float *y, std::int64_t dim, const float *scale, float inv) {
    const __m256 r = _mm256_set1_ps(inv);
    for (std::int64_t d = 0; d < dim; d += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x + d)));
        const __m256 xf = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        store<kStream>(y + d, _mm256_mul_ps(_mm256_mul_ps(xf, r), _mm256_loadu_ps(scale + d)));
    }
}

// FP32 -> FP32.
template <bool kStream>
void output_row(const float *x, float *y, std::int64_t dim, const float *scale, float inv) {
    const __m256 r = _mm256_set1_ps(inv);
    for (std::int64_t d = 0; d < dim; d += 8) {
        store<kStream>(y + d, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + d), r), _mm256_loadu_ps(scale + d)));
    }
}

// Rows [begin, end) of a call: chunk by chunk, the sums (prefetching the next chunk), then the
// outputs.
template <class In, class Out, bool kStream>
void norm_rows(const Rows &call, std::int64_t begin, std::int64_t end) {
    const auto *x = static_cast<const In *>(call.x);
    auto *y = static_cast<Out *>(call.out);
    const std::int64_t dim = call.dim;
    const std::int64_t chunk = std::max<std::int64_t>(1, kChunkBytes / (dim * static_cast<std::int64_t>(sizeof(In))));
    float inv[kChunkBytes / (kBlock * 2)];  // one per row of a chunk: at most 16 KiB of 64-element BF16 rows
    for (std::int64_t first = begin; first < end; first += chunk) {
        const std::int64_t last = std::min(end, first + chunk), next_end = std::min(end, last + chunk);
        for (std::int64_t row = first; row < last; ++row) {
            const std::int64_t ahead_row = row + chunk;
            const char *ahead = call.prefetch && ahead_row < next_end
                                    ? reinterpret_cast<const char *>(x + ahead_row * dim)
                                    : nullptr;
            inv[row - first] = inverse_rms(sum_squares(x + row * dim, dim, ahead), dim, call.eps);
        }
        for (std::int64_t row = first; row < last; ++row) {
            output_row<kStream>(x + row * dim, y + row * dim, dim, call.scale, inv[row - first]);
        }
    }
    if constexpr (kStream) _mm_sfence();
}

using RowsFn = void (*)(const Rows &, std::int64_t, std::int64_t);

template <class In, class Out>
RowsFn pick_stores(bool stream) {
    return stream ? norm_rows<In, Out, true> : norm_rows<In, Out, false>;
}

RowsFn pick(DType in, DType out, bool stream) {
    if (in == DType::f32) return pick_stores<float, float>(stream);
    return out == DType::bf16 ? pick_stores<std::uint16_t, std::uint16_t>(stream) : pick_stores<std::uint16_t, float>(stream);
}

// The caller and kThreads - 1 persistent workers, which claim a call's parts from one counter:
// a worker that wakes late finds its share done by the caller, which never waits for a worker
// that has not started. A worker polls for kSpin after its last job, then sleeps until the next.
class Workers {
public:
    Workers() {
        for (int i = 1; i < kThreads; ++i) slots_.emplace_back(std::make_unique<Slot>());
        for (auto &slot : slots_) threads_.emplace_back([this, s = slot.get()] { work(*s); });
    }
    ~Workers() {
        stop_ = true;
        for (auto &slot : slots_) post(*slot, nullptr);
        for (auto &t : threads_) t.join();
    }

    // Runs job(part) for every part in [0, parts), on the calling thread and the workers.
    template <class Job>
    void run(int parts, const Job &job) {
        if (parts <= 1) {
            for (int part = 0; part < parts; ++part) job(part);
            return;
        }
        Call call{[](const void *context, int part) { (*static_cast<const Job *>(context))(part); }, &job, parts};
        for (auto &slot : slots_) post(*slot, &call);
        claim(call);
        // A worker that has not entered the call is kept out of it; one that has is waited for.
        for (auto &slot : slots_) {
            std::uint64_t before = slot->posted - 1;
            if (!slot->entered.compare_exchange_strong(before, slot->posted)) {
                while (slot->left.load(std::memory_order_acquire) != slot->posted) _mm_pause();
            }
        }
    }

private:
    struct Call {
        void (*fn)(const void *, int);
        const void *context;
        int parts;
        std::atomic<int> next{0};
    };

    struct Slot {
        std::uint64_t posted = 0;             // the caller's count of calls posted
        std::atomic<std::uint64_t> job{0};    // the last call posted
        std::atomic<Call *> call{nullptr};
        std::atomic<std::uint64_t> entered{0};  // the last call the worker entered or was kept out of
        std::atomic<std::uint64_t> left{0};     // the last call the worker left
        std::atomic<bool> sleeping{false};
        std::mutex mutex;
        std::condition_variable wake;
    };

    static void claim(Call &call) {
        for (int part; (part = call.next.fetch_add(1, std::memory_order_relaxed)) < call.parts;) call.fn(call.context, part);
    }

    void post(Slot &slot, Call *call) {
        slot.call.store(call, std::memory_order_relaxed);
        slot.job.store(++slot.posted, std::memory_order_seq_cst);
        if (slot.sleeping.load(std::memory_order_seq_cst)) {
            std::lock_guard<std::mutex> lock(slot.mutex);
            slot.wake.notify_one();
        }
    }

    void work(Slot &slot) {
        std::uint64_t seen = 0;
        for (;;) {
            const auto spin_end = std::chrono::steady_clock::now() + kSpin;
            for (unsigned polls = 0; slot.job.load(std::memory_order_acquire) == seen; ++polls) {
                _mm_pause();
                if (polls % 64 == 63 && std::chrono::steady_clock::now() > spin_end) {
                    std::unique_lock<std::mutex> lock(slot.mutex);
                    slot.sleeping.store(true, std::memory_order_seq_cst);
                    slot.wake.wait(lock, [&] { return slot.job.load(std::memory_order_seq_cst) != seen; });
                    slot.sleeping.store(false, std::memory_order_relaxed);
                }
            }
            seen = slot.job.load(std::memory_order_acquire);
            if (stop_) return;
            std::uint64_t before = seen - 1;
            if (slot.entered.compare_exchange_strong(before, seen)) {
                claim(*slot.call.load(std::memory_order_relaxed));
                slot.left.store(seen, std::memory_order_release);
            }
        }
    }

    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
};

Workers &workers() {
    static Workers pool;
    return pool;
}

bool aligned(const void *p) { return reinterpret_cast<std::uintptr_t>(p) % kStreamAlignment == 0; }

class HandRunner : public Runner {
public:
    explicit HandRunner(Workspace &ws) : ws_(ws), dim_(ws.spec().dim()), rows_(ws.spec().elements() / dim_) {
        const Case &c = ws.spec();
        const float *scale = ws.scale().data();
        // BF16 outputs read the scale as the unpacked halves hold the elements: per 16, elements
        // 0-3 and 8-11, then 4-7 and 12-15.
        scale_.assign(scale, scale + dim_);
        if (c.out == DType::bf16) {
            for (std::int64_t d = 0; d < dim_; d += 16) {
                for (int i = 0; i < 8; ++i) {
                    const int lo = i < 4 ? i : i + 4;
                    scale_[d + i] = scale[d + lo];
                    scale_[d + 8 + i] = scale[d + lo + 4];
                }
            }
        }
        const std::int64_t in_bytes = c.elements() * static_cast<std::int64_t>(dtype_size(c.in));
        const std::int64_t out_bytes = c.elements() * static_cast<std::int64_t>(dtype_size(c.out));
        prefetch_ = in_bytes >= kFromMemoryBytes;
        const std::int64_t part_bytes = prefetch_ ? kMemoryPartBytes : kPartBytes;
        const std::int64_t fewest = rows_ >= 2 && in_bytes >= kSplitBytes ? 2 : 1;
        parts_ = static_cast<int>(std::clamp((in_bytes + part_bytes - 1) / part_bytes, fewest, rows_));
        stream_ = out_bytes >= kFromMemoryBytes && (dim_ * static_cast<std::int64_t>(dtype_size(c.out))) % kStreamAlignment == 0;
    }

    // Forces the from-memory paths (prefetch, and streaming stores where the output is aligned)
    // on a call of any size.
    void force_from_memory() {
        prefetch_ = true;
        stream_ = (dim_ * static_cast<std::int64_t>(dtype_size(ws_.spec().out))) % kStreamAlignment == 0;
    }

    const void *run(std::size_t pair) override {
        const Case &c = ws_.spec();
        const bool stream = stream_ && aligned(ws_.out(pair));
        const Rows call{ws_.x(pair), ws_.out(pair), dim_, scale_.data(), kEps, prefetch_, stream};
        const RowsFn fn = pick(c.in, c.out, stream);
        const std::int64_t parts = parts_;
        workers().run(parts_, [&](int part) { fn(call, rows_ * part / parts, rows_ * (part + 1) / parts); });
        return ws_.out(pair);
    }

private:
    Workspace &ws_;
    std::int64_t dim_, rows_;
    std::vector<float> scale_;
    int parts_ = 1;
    bool prefetch_ = false, stream_ = false;
};

bool supported(const Case &c) {
    const bool pair = (c.in == DType::bf16 && (c.out == DType::bf16 || c.out == DType::f32)) ||
                      (c.in == DType::f32 && c.out == DType::f32);
    return pair && c.num_modality == 1 && c.dim() % kBlock == 0 && __builtin_cpu_supports("avx2");
}

// The first tokens of `c` (at most 64), by the library and by the hand kernel with ordinary and
// with from-memory paths: the bytes must be the same, or the peer is not the bar.
void check_against_library(const Case &c) {
    Case small = c;
    small.tokens = std::min<std::int64_t>(c.tokens, 64);
    Workspace ws(small);
    const std::size_t bytes = static_cast<std::size_t>(small.elements()) * dtype_size(small.out);
    const auto *library = static_cast<const std::byte *>(ours().prepare(ws)->run(0));
    const std::vector<std::byte> expected(library, library + bytes);
    for (const bool from_memory : {false, true}) {
        std::memset(ws.out(0), 0, bytes);
        HandRunner hand(ws);
        if (from_memory) hand.force_from_memory();
        const auto *got = static_cast<const std::byte *>(hand.run(0));
        const auto differs = std::mismatch(expected.begin(), expected.end(), got).first;
        if (differs != expected.end()) {
            throw std::runtime_error("hand_avx2 differs from the library" + std::string(from_memory ? " (from-memory paths)" : "") +
                                     " at byte " + std::to_string(differs - expected.begin()) + " of " + small.name());
        }
    }
}

}  // namespace

Implementation hand_avx2_peer() {
    return {"hand_avx2", kThreads, supported, [](Workspace &ws) {
                check_against_library(ws.spec());
                return std::make_unique<HandRunner>(ws);
            }};
}

}  // namespace magi2norm::bench
