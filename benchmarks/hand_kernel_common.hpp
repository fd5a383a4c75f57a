// What a hand-written kernel of the library's arithmetic needs besides its vector code: the
// library's split of a call into parts and chunks, the two-thread pool that runs the parts, the
// runner and Implementation around a kernel struct, and the bit-for-bit check against the
// library, on the library's random data and on rows of special values (FP32-subnormal results,
// NaN, Inf, zero, overflowing squares).
// The rules are peer_hand_avx2.cpp's (its header comment); peer_hand_avx2.cpp and
// peer_hand_avx512.cpp both take them from here, each with its own kernel struct.
//
// Everything here has internal linkage (the unnamed namespace): a file that includes this header
// is built with its own instruction set flags (-mavx512f, ...), and an inline function shared
// between such files could be linked from the file whose instructions the CPU lacks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <immintrin.h>

#include "implementation.hpp"

namespace magi2norm::bench::hand_kernel {

namespace {

constexpr std::int64_t kBlock = 64;                    // 16 lanes x sum_steps 4
constexpr std::int64_t kSplitBytes = 32 * 1024;        // from here, at least two parts
constexpr std::int64_t kPartBytes = 64 * 1024;         // input bytes a part (1 MiB from memory)
constexpr std::int64_t kMemoryPartBytes = 1 << 20;
constexpr std::int64_t kChunkBytes = 16 * 1024;        // input rows whose sums come first
constexpr std::int64_t kFromMemoryBytes = 4 << 20;     // prefetch, and stream outputs, from here
constexpr int kThreads = 2;  // on the library's pool (run_on_library_pool), as the library runs

// One call's rows as the kernel sees them.
struct Rows {
    const void *x;
    void *out;
    std::int64_t dim;
    const float *scale;  // the row's scale, in the order the output loop reads it
    float eps;
    bool prefetch, stream;
};

inline float inverse_rms(float sum, std::int64_t dim, float eps) {
    const float mean = sum / static_cast<float>(dim) + eps;
    return 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean)));
}

// Rows [begin, end) of a call: chunk by chunk, the sums (prefetching the next chunk), then the
// outputs. `Kernel` has sum_squares(const In *, dim, ahead) (ahead: null, or the row to
// prefetch) and output_row<kStream>(const In *, Out *, dim, scale, inv).
template <class Kernel, class In, class Out, bool kStream>
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
            inv[row - first] = inverse_rms(Kernel::sum_squares(x + row * dim, dim, ahead), dim, call.eps);
        }
        for (std::int64_t row = first; row < last; ++row) {
            Kernel::template output_row<kStream>(x + row * dim, y + row * dim, dim, call.scale, inv[row - first]);
        }
    }
    if constexpr (kStream) _mm_sfence();
}

using RowsFn = void (*)(const Rows &, std::int64_t, std::int64_t);

template <class Kernel, class In, class Out>
RowsFn pick_stores(bool stream) {
    return stream ? norm_rows<Kernel, In, Out, true> : norm_rows<Kernel, In, Out, false>;
}

// The kernel of the dtype pair: BF16 -> BF16, BF16 -> FP32 or FP32 -> FP32.
template <class Kernel>
RowsFn pick(DType in, DType out, bool stream) {
    if (in == DType::f32) return pick_stores<Kernel, float, float>(stream);
    return out == DType::bf16 ? pick_stores<Kernel, std::uint16_t, std::uint16_t>(stream)
                              : pick_stores<Kernel, std::uint16_t, float>(stream);
}

// The dtype pairs a hand kernel covers, with one modality and rows of whole blocks.
inline bool covers(const Case &c) {
    const bool pair = (c.in == DType::bf16 && (c.out == DType::bf16 || c.out == DType::f32)) ||
                      (c.in == DType::f32 && c.out == DType::f32);
    return pair && c.num_modality == 1 && c.dim() % kBlock == 0;
}

// How a call of `c` is split: parts of about 64 KiB of input (1 MiB from memory; at least two
// from 32 KiB), prefetching from 4 MiB of input, streaming stores from 4 MiB of output where
// each row's output starts on a `stream_alignment` boundary (the call's pointer is checked per
// call).
struct Split {
    int parts = 1;
    bool prefetch = false, stream = false;
};

inline Split split_of(const Case &c, std::int64_t stream_alignment) {
    const std::int64_t dim = c.dim(), rows = c.elements() / dim;
    const std::int64_t in_bytes = c.elements() * static_cast<std::int64_t>(dtype_size(c.in));
    const std::int64_t out_bytes = c.elements() * static_cast<std::int64_t>(dtype_size(c.out));
    Split s;
    s.prefetch = in_bytes >= kFromMemoryBytes;
    const std::int64_t part_bytes = s.prefetch ? kMemoryPartBytes : kPartBytes;
    const std::int64_t fewest = rows >= 2 && in_bytes >= kSplitBytes ? 2 : 1;
    s.parts = static_cast<int>(std::clamp((in_bytes + part_bytes - 1) / part_bytes, fewest, rows));
    s.stream = out_bytes >= kFromMemoryBytes && (dim * static_cast<std::int64_t>(dtype_size(c.out))) % stream_alignment == 0;
    return s;
}

// Element i of a buffer of `dtype` (BF16 or FP32) set to the FP32 value of `bits`: for BF16, its
// high half (the bits given for BF16 inputs have a clear low half).
inline void set_bits(DType dtype, void *data, std::size_t i, std::uint32_t bits) {
    if (dtype == DType::bf16) {
        static_cast<std::uint16_t *>(data)[i] = static_cast<std::uint16_t>(bits >> 16);
    } else {
        std::memcpy(static_cast<float *>(data) + i, &bits, sizeof bits);
    }
}

// Overwrites some rows of pair 0's input of `ws` (at least 9 rows, of at least 64 elements)
// with special values, spread over the call's parts:
//   - random values with BF16-subnormal inputs and inputs of 2^-126..2^-124 among them: results
//     below 2^-126 (FP32 subnormals), and just above it;
//   - one element of 2^40 and the rest from 2^-60 down to 2^-99: results from FP32 normals
//     through subnormals of every size to zero;
//   - a quiet NaN; a negative NaN with a payload; a signaling NaN (the row becomes NaN);
//   - +Inf and -Inf (mean square Inf: finite entries give +-0, the Inf entries NaN);
//   - a zero row; a row of BF16 subnormals (inv near 1/sqrt(eps)); a row with one element whose
//     square overflows (x^2 = Inf, as an Inf input).
inline void write_special_rows(Workspace &ws) {
    const Case &c = ws.spec();
    const std::int64_t dim = c.dim(), rows = c.elements() / dim;
    constexpr std::int64_t kKinds = 9;
    if (rows < kKinds || dim < kBlock) throw std::logic_error("too few rows for the special rows: " + c.name());
    void *x = const_cast<void *>(ws.x(0));
    const auto u = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
    for (std::int64_t kind = 0; kind < kKinds; ++kind) {
        const std::int64_t row = kind * (rows - 1) / (kKinds - 1);
        const auto at = [&](std::int64_t d, std::uint32_t bits) { set_bits(c.in, x, static_cast<std::size_t>(row * dim + d), bits); };
        for (std::int64_t d = 0; d < dim; ++d) {
            const std::uint32_t sign = u(d & 1) << 31;
            switch (kind) {
            case 0:
                if (d % 5 == 1) at(d, sign | u(d * 37 % 127 + 1) << 16);                          // BF16 subnormal
                if (d % 5 == 3) at(d, sign | u(d % 3 + 1) << 23 | u(d * 13 % 128) << 16);         // 2^-126..2^-124
                break;
            case 1: if (d == dim / 3) at(d, 0x7fc00000u); break;
            case 2: if (d == dim - 1) at(d, 0xffd50000u); break;
            case 3: if (d == 7) at(d, 0x7f810000u); break;
            case 4:
                if (d == 5) at(d, 0x7f800000u);
                if (d == dim - 2) at(d, 0xff800000u);
                break;
            case 5: at(d, 0); break;
            case 6: at(d, sign | u(d * 37 % 127 + 1) << 16); break;
            case 7: at(d, d == 0 ? u(127 + 40) << 23 : sign | u(127 - 60 - d % 40) << 23 | u(d * 29 % 128) << 16); break;
            case 8: if (d == 3) at(d, u(127 + 100) << 23); break;
            }
        }
    }
}

// Counts of FP32-subnormal-sized (nonzero, below 2^-126) and NaN elements in `n` elements of
// `dtype` (BF16 or FP32).
inline void count_special(DType dtype, const void *data, std::size_t n, std::size_t &subnormals, std::size_t &nans) {
    subnormals = nans = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t bits;
        if (dtype == DType::bf16) {
            bits = static_cast<std::uint32_t>(static_cast<const std::uint16_t *>(data)[i]) << 16;
        } else {
            std::memcpy(&bits, static_cast<const float *>(data) + i, sizeof bits);
        }
        const std::uint32_t exponent = bits & 0x7f800000u, mantissa = bits & 0x007fffffu;
        subnormals += exponent == 0 && mantissa != 0;
        nans += exponent == 0x7f800000u && mantissa != 0;
    }
}

// Runs the library and `make(ws, from_memory)`'s runner, with its ordinary and its from-memory
// paths, on pair 0 of `ws`; throws "<who> differs from the library" unless every output byte is
// the same. `what` names the data in the message.
template <class MakeRunner>
void check_against_library(Workspace &ws, const std::string &who, const std::string &what, const MakeRunner &make) {
    const Case &c = ws.spec();
    const std::size_t bytes = static_cast<std::size_t>(c.elements()) * dtype_size(c.out);
    const auto *library = static_cast<const std::byte *>(ours().prepare(ws)->run(0));
    const std::vector<std::byte> expected(library, library + bytes);
    for (const bool from_memory : {false, true}) {
        std::memset(ws.out(0), 0, bytes);
        const std::unique_ptr<Runner> hand = make(ws, from_memory);
        const auto *got = static_cast<const std::byte *>(hand->run(0));
        const auto differs = std::mismatch(expected.begin(), expected.end(), got).first;
        if (differs != expected.end()) {
            throw std::runtime_error(who + " differs from the library" + (from_memory ? " (from-memory paths)" : "") + " on " +
                                     what + " at byte " + std::to_string(differs - expected.begin()) + " of " + c.name());
        }
    }
}

// The check on the first tokens of `c` (at most 64) as the workspace makes them, then on 64
// tokens with the special rows, whose library output must hold FP32-subnormal results and NaNs
// (else the rows test nothing).
template <class MakeRunner>
void check_bits(const Case &c, const std::string &who, const MakeRunner &make) {
    Case small = c;
    small.tokens = std::min<std::int64_t>(c.tokens, 64);
    {
        Workspace ws(small);
        check_against_library(ws, who, "random data", make);
    }
    small.tokens = 64;
    Workspace ws(small);
    write_special_rows(ws);
    check_against_library(ws, who, "special rows", make);
    std::size_t subnormals = 0, nans = 0;
    count_special(small.out, ours().prepare(ws)->run(0), static_cast<std::size_t>(small.elements()), subnormals, nans);
    if (subnormals == 0 || nans == 0) {
        throw std::logic_error("the special rows gave " + std::to_string(subnormals) + " subnormal and " + std::to_string(nans) +
                               " NaN outputs on " + small.name());
    }
}

// Runs a workspace's case on `Kernel`, a struct with norm_rows's row kernels and:
//   kStreamAlignment: the boundary its streaming stores need, each row's output and the call's;
//   kCopiesScale: whether its output loops read the scale in an order of their own, then
//   copy_scale(scale, dim, out dtype) -> std::vector<float>, the scale in that order (made once
//   here, outside the timed calls); else they read the workspace's.
template <class Kernel>
class KernelRunner : public Runner {
public:
    explicit KernelRunner(Workspace &ws)
        : ws_(ws), dim_(ws.spec().dim()), rows_(ws.spec().elements() / dim_),
          split_(split_of(ws.spec(), Kernel::kStreamAlignment)) {
        if constexpr (Kernel::kCopiesScale) scale_ = Kernel::copy_scale(ws.scale().data(), dim_, ws.spec().out);
    }

    // Forces the from-memory paths (prefetch, and streaming stores where the output is aligned)
    // on a call of any size.
    void force_from_memory() {
        split_.prefetch = true;
        split_.stream = (dim_ * static_cast<std::int64_t>(dtype_size(ws_.spec().out))) % Kernel::kStreamAlignment == 0;
    }

    const void *run(std::size_t pair) override {
        const Case &c = ws_.spec();
        const bool stream = split_.stream && reinterpret_cast<std::uintptr_t>(ws_.out(pair)) % Kernel::kStreamAlignment == 0;
        const float *scale = Kernel::kCopiesScale ? scale_.data() : ws_.scale().data();
        const Rows call{ws_.x(pair), ws_.out(pair), dim_, scale, kEps, split_.prefetch, stream};
        const RowsFn fn = pick<Kernel>(c.in, c.out, stream);
        const std::int64_t parts = split_.parts;
        auto job = [&](int part) {
            fn(call, rows_ * part / parts, rows_ * (part + 1) / parts);
            return 0;
        };
        run_on_library_pool(kThreads, split_.parts, [](void *context, int part) { return (*static_cast<decltype(job) *>(context))(part); }, &job);
        return ws_.out(pair);
    }

private:
    Workspace &ws_;
    std::int64_t dim_, rows_;
    Split split_;
    std::vector<float> scale_;  // empty unless Kernel::kCopiesScale
};

template <class Kernel>
std::unique_ptr<Runner> make_kernel_runner(Workspace &ws, bool from_memory) {
    auto runner = std::make_unique<KernelRunner<Kernel>>(ws);
    if (from_memory) runner->force_from_memory();
    return runner;
}

// The benchmark `name` of `Kernel`: the cases it covers where runs_here(), each checked against
// the library in its prepare, before timing.
template <class Kernel>
Implementation kernel_implementation(const std::string &name, bool (*runs_here)()) {
    return {name, kThreads, [runs_here](const Case &c) { return covers(c) && runs_here(); },
            [name](Workspace &ws) -> std::unique_ptr<Runner> {
                check_bits(ws.spec(), name, make_kernel_runner<Kernel>);
                return std::make_unique<KernelRunner<Kernel>>(ws);
            }};
}

// The benchmark `name` of a candidate arithmetic `Kernel` (not the library's bits), its prepare
// checking the case's first tokens against a float64 evaluation of the formula before timing:
// SPEC.md's gate 1 (|a - b| <= 1e-6 + 1e-6 |b|) for FP32 outputs, gate 3 (one BF16 ulp) for BF16.
template <class Kernel>
Implementation candidate_implementation(const std::string &name, bool (*runs_here)()) {
    return {name, kThreads, [runs_here](const Case &c) { return covers(c) && runs_here(); },
            [name](Workspace &ws) -> std::unique_ptr<Runner> {
                auto runner = std::make_unique<KernelRunner<Kernel>>(ws);
                const Case &c = ws.spec();
                const std::int64_t dim = c.dim(), rows = std::min<std::int64_t>(c.elements() / dim, 64);
                const void *y = runner->run(0);
                const auto value = [](DType dtype, const void *data, std::int64_t i) -> double {
                    if (dtype == DType::f32) return static_cast<const float *>(data)[i];
                    std::uint32_t bits = static_cast<std::uint32_t>(static_cast<const std::uint16_t *>(data)[i]) << 16;
                    float v;
                    std::memcpy(&v, &bits, sizeof v);
                    return v;
                };
                for (std::int64_t r = 0; r < rows; ++r) {
                    const auto x = [&](std::int64_t d) { return value(c.in, ws.x(0), r * dim + d); };
                    double sum = 0;
                    for (std::int64_t d = 0; d < dim; ++d) sum += x(d) * x(d);
                    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(dim) + static_cast<double>(kEps));
                    for (std::int64_t d = 0; d < dim; ++d) {
                        const double expected = x(d) * inv * ws.scale()[static_cast<std::size_t>(d)];
                        const double bound = c.out == DType::f32 ? 1e-6 + 1e-6 * std::abs(expected)
                                             : expected == 0 ? 0 : std::ldexp(1.0, std::ilogb(expected) - 7);
                        if (std::abs(value(c.out, y, r * dim + d) - expected) > bound) {
                            throw std::runtime_error(name + " fails the contract on " + c.name() + " at row " + std::to_string(r));
                        }
                    }
                }
                return runner;
            }};
}

}  // namespace

}  // namespace magi2norm::bench::hand_kernel
