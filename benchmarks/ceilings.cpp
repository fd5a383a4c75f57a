#include "ceilings.hpp"

#include <emmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "aligned_buffer.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::bench {

namespace {

// Far beyond any last-level cache, so every run streams from and to DRAM. One size for the
// ceilings at start and those measured around each case: glibc's memcpy changes method with
// the size of a call (ordinary stores below x86_non_temporal_threshold, 192 MiB here; streaming
// stores above), and with 128 MiB around each case (64 MiB a thread) it took the ordinary path,
// 10-16 GB/s against 28.5 at 512 MiB, which made "of memcpy" a second copy ceiling, below the
// copy loop's (NOTES.md, stop 14). Both now copy 512 MiB (256 MiB a thread on 2 threads).
constexpr std::size_t kCeilingBytes = std::size_t{512} << 20;
constexpr int kRuns = 3;

enum class Summary { best, mean };

using CopyFn = void (*)(std::byte *dst, const std::byte *src, std::size_t bytes);

void copy_memcpy(std::byte *dst, const std::byte *src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

// SSE2 is the x86-64 baseline, so these loops build with the project's flags as they are; at
// DRAM sizes the vector width does not change the bandwidth. One cache line per iteration,
// written with `Store`: an ordinary store (through the cache, reading each line first) or a
// streaming one. `bytes` is a multiple of 64 and both pointers are 64-byte aligned (measure()).
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

// Best or mean bandwidth (bytes read + written per second) of `copy` over `threads` threads,
// each copying a cache-line aligned slice. One unmeasured run first warms the TLB and the code.
double measure(CopyFn copy, std::byte *dst, const std::byte *src, std::size_t bytes, int threads, Summary summary) {
    const std::size_t lines = bytes / 64;
    auto run = [&] {
        std::vector<std::thread> workers;
        for (int k = 0; k < threads; ++k) {
            const std::size_t begin = lines * k / threads * 64, end = lines * (k + 1) / threads * 64;
            workers.emplace_back(copy, dst + begin, src + begin, end - begin);
        }
        for (std::thread &w : workers) w.join();
    };
    run();
    double best = 0, total_seconds = 0;
    for (int r = 0; r < kRuns; ++r) {
        const auto start = std::chrono::steady_clock::now();
        run();
        const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
        best = std::max(best, 2.0 * static_cast<double>(bytes) / seconds.count());
        total_seconds += seconds.count();
    }
    return summary == Summary::best ? best : 2.0 * static_cast<double>(bytes) * kRuns / total_seconds;
}

// The copies' source and destination, allocated and touched once for the process. Allocating
// and freeing them around every case put a gigabyte of page faults and unmapping just before the
// case's timed loop: f32 [32768, 12288] then ran at a median 23.7 GB/s over 11 rounds against
// 31.0 without and 32.0 after copies between kept buffers, and the suite's plain cases ran
// slower than the same kernel through other views, whose loops follow no ceilings (NOTES.md,
// stop 21).
struct CopyBuffers {
    AlignedBuffer src{kCeilingBytes}, dst{kCeilingBytes};
    CopyBuffers() { std::memset(src.data(), 0x5a, kCeilingBytes); }
};

Ceilings measure_ceilings(Summary summary) {
    static CopyBuffers buffers;
    Ceilings c;
    c.threads = std::max(1, magi2norm::num_threads());
    c.bytes = kCeilingBytes;
    std::byte *dst = buffers.dst.data();
    const std::byte *src = buffers.src.data();
    c.memcpy_bps = measure(copy_memcpy, dst, src, kCeilingBytes, c.threads, summary);
    c.copy_bps = measure(copy_ordinary, dst, src, kCeilingBytes, c.threads, summary);
    c.streaming_copy_bps = measure(copy_streaming, dst, src, kCeilingBytes, c.threads, summary);
    return c;
}

// "32768K" -> bytes.
std::size_t parse_cache_size(const std::string &text) {
    std::size_t value = std::stoull(text);
    if (text.find('K') != std::string::npos) value <<= 10;
    if (text.find('M') != std::string::npos) value <<= 20;
    return value;
}

}  // namespace

const Ceilings &ceilings() {
    static const Ceilings measured = measure_ceilings(Summary::best);
    return measured;
}

Ceilings ceilings_now() { return measure_ceilings(Summary::mean); }

std::size_t last_level_cache_bytes() {
    std::size_t largest = 0;
    for (int index = 0;; ++index) {
        std::ifstream size_file("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
        std::string size;
        if (!(size_file >> size)) break;
        largest = std::max(largest, parse_cache_size(size));
    }
    return largest > 0 ? largest : std::size_t{32} << 20;
}

}  // namespace magi2norm::bench
