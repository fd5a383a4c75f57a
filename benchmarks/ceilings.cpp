#include "ceilings.hpp"

#include <algorithm>
#include <fstream>
#include <string>

#include "copy_ceilings.hpp"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm::bench {

namespace {

// Far beyond any last-level cache, so every run streams from and to DRAM. One size for the
// ceilings at start and those measured around each case, above the size where glibc's memcpy
// turns to streaming stores (x86_non_temporal_threshold, 192 MiB where this was set): a smaller
// copy takes its ordinary-store path, and "of memcpy" would be a second, lower copy ceiling.
constexpr std::size_t kCeilingBytes = std::size_t{512} << 20;
constexpr int kRuns = 3;

Ceilings measure_ceilings(measure::Summary summary) {
    // Its buffers stay for the process: allocating them around every case put a gigabyte of page
    // faults and unmapping just before the case's timed loop, and slowed the case.
    static measure::CopyMeter meter;
    Ceilings c;
    c.threads = std::max(1, magi2norm::num_threads());
    c.bytes = kCeilingBytes;
    const auto copy_rate = [&](measure::CopyKind kind) {
        measure::CopyRun run;
        run.kind = kind;
        run.bytes = kCeilingBytes;
        run.threads = c.threads;
        run.runs = kRuns;
        run.summary = summary;
        return meter.bytes_per_second(run);
    };
    c.memcpy_bps = copy_rate(measure::CopyKind::memcpy);
    c.copy_bps = copy_rate(measure::CopyKind::ordinary_stores);
    c.streaming_copy_bps = copy_rate(measure::CopyKind::streaming_stores);
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
    static const Ceilings measured = measure_ceilings(measure::Summary::best);
    return measured;
}

Ceilings ceilings_now() { return measure_ceilings(measure::Summary::mean); }

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
