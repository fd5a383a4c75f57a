#include "copy_ceilings.hpp"

#include <emmintrin.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "run_times.hpp"

namespace magi2norm::measure {

namespace {

constexpr std::size_t kLine = 64;

using CopyFn = void (*)(std::byte *dst, const std::byte *src, std::size_t bytes);

void copy_memcpy(std::byte *dst, const std::byte *src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

// SSE2 is the x86-64 baseline, so these loops build with the project's flags as they are; at
// DRAM sizes the vector width does not change the bandwidth. One cache line per iteration,
// written with `Store`: an ordinary store (through the cache, reading each line first) or a
// streaming one. `bytes` is a multiple of 64 and both pointers are 64-byte aligned.
template <void (*Store)(__m128i *, __m128i)>
void copy_lines(std::byte *dst, const std::byte *src, std::size_t bytes) {
    auto *d = reinterpret_cast<__m128i *>(dst);
    const auto *s = reinterpret_cast<const __m128i *>(src);
    for (std::size_t i = 0; i < bytes / 16; i += 4) {
        const __m128i a = _mm_load_si128(s + i), b = _mm_load_si128(s + i + 1);
        const __m128i c = _mm_load_si128(s + i + 2), e = _mm_load_si128(s + i + 3);
        Store(d + i, a);
        Store(d + i + 1, b);
        Store(d + i + 2, c);
        Store(d + i + 3, e);
    }
}

void store_ordinary(__m128i *p, __m128i v) { _mm_store_si128(p, v); }
void store_streaming(__m128i *p, __m128i v) { _mm_stream_si128(p, v); }

void copy_ordinary(std::byte *dst, const std::byte *src, std::size_t bytes) {
    copy_lines<store_ordinary>(dst, src, bytes);
}

void copy_streaming(std::byte *dst, const std::byte *src, std::size_t bytes) {
    copy_lines<store_streaming>(dst, src, bytes);
    _mm_sfence();  // streaming stores are weakly ordered: drain them before the copy counts as done
}

CopyFn copy_function(CopyKind kind) {
    switch (kind) {
    case CopyKind::ordinary_stores: return copy_ordinary;
    case CopyKind::streaming_stores: return copy_streaming;
    default: return copy_memcpy;
    }
}

}  // namespace

double CopyMeter::bytes_per_second(const CopyRun &run) {
    if (run.kind != CopyKind::memcpy && run.bytes % kLine != 0) {
        throw std::invalid_argument("the copy loops move whole cache lines: bytes must be a multiple of 64");
    }
    const std::size_t needed = 2 * run.bytes * run.pairs;
    if (pool_bytes_ < needed) {
        pool_.reset();  // release the old pool before taking the new one
        // Not zeros: copying zeros over zeros lets some CPUs skip the writes.
        pool_.emplace(needed, std::byte{0x5a});
        pool_bytes_ = needed;
    }
    // Pair i is a source and, right after it, its destination; the pool is 64-byte aligned, so
    // with whole cache lines every slice starts on a line.
    std::byte *const base = pool_->data();
    const CopyFn copy = copy_function(run.kind);
    const int threads = std::max(1, run.threads);
    const std::size_t lines = run.bytes / kLine;
    // Each thread copies its slice of every pair, so threads start once per run; one thread is
    // the calling one (starting a thread costs a small copy more than its bytes).
    auto once = [&] {
        if (threads == 1) {
            for (std::size_t i = 0; i < run.pairs; ++i) copy(base + 2 * run.bytes * i + run.bytes, base + 2 * run.bytes * i, run.bytes);
            return;
        }
        std::vector<std::thread> workers;
        for (int k = 0; k < threads; ++k) {
            const std::size_t begin = lines * k / threads * kLine;
            const std::size_t end = k + 1 == threads ? run.bytes : lines * (k + 1) / threads * kLine;
            workers.emplace_back([=, &run] {
                for (std::size_t i = 0; i < run.pairs; ++i) {
                    std::byte *const source = base + 2 * run.bytes * i;
                    copy(source + run.bytes + begin, source + begin, end - begin);
                }
            });
        }
        for (std::thread &w : workers) w.join();
    };
    const RunTimes times = time_runs(run.runs, once);
    const double seconds = run.summary == Summary::best ? times.best_seconds : times.mean_seconds;
    return 2.0 * static_cast<double>(run.bytes) * static_cast<double>(run.pairs) / seconds;
}

namespace {

// One size for the ceilings at start and those measured around each case, above the size where
// glibc's memcpy turns to streaming stores (x86_non_temporal_threshold, 192 MiB where this was
// set): a smaller copy takes its ordinary-store path, and "of memcpy" would be a second, lower
// copy ceiling.
constexpr std::size_t kCeilingBytes = std::size_t{512} << 20;
constexpr int kCeilingRuns = 3;

CopyCeilings measure_ceilings(int threads, Summary summary) {
    // Its buffers stay for the process: allocating them around every case put a gigabyte of page
    // faults and unmapping just before the case's timed loop, and slowed the case.
    static CopyMeter meter;
    CopyCeilings c;
    c.threads = std::max(1, threads);
    c.bytes = kCeilingBytes;
    const auto rate = [&](CopyKind kind) {
        CopyRun run;
        run.kind = kind;
        run.bytes = kCeilingBytes;
        run.threads = c.threads;
        run.runs = kCeilingRuns;
        run.summary = summary;
        return meter.bytes_per_second(run);
    };
    c.memcpy_bps = rate(CopyKind::memcpy);
    c.copy_bps = rate(CopyKind::ordinary_stores);
    c.streaming_copy_bps = rate(CopyKind::streaming_stores);
    return c;
}

}  // namespace

const CopyCeilings &copy_ceilings(int threads) {
    static const CopyCeilings measured = measure_ceilings(threads, Summary::best);
    return measured;
}

CopyCeilings copy_ceilings_now(int threads) { return measure_ceilings(threads, Summary::mean); }

double MemcpyCeilingBySize::gbps(std::size_t traffic_bytes, int repeats) {
    if (const auto it = measured_.find(traffic_bytes); it != measured_.end()) return it->second;
    CopyRun run;
    run.kind = CopyKind::memcpy;
    run.bytes = std::max<std::size_t>(traffic_bytes / 2, 64);  // a copy of N bytes reads N and writes N
    run.pairs = std::max<std::size_t>(1, kDramFootprint / (2 * run.bytes));
    run.threads = threads_;
    run.runs = repeats;
    run.summary = Summary::best;
    return measured_[traffic_bytes] = meter_.bytes_per_second(run) / 1e9;
}

}  // namespace magi2norm::measure
