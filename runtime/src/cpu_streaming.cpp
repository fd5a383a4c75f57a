#include "cpu_streaming.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "threads.hpp"

namespace magi2norm {

namespace {
// Each field on its own: a call that races with set_streaming_policy sees old or new values,
// and either choice gives the same results.
std::atomic<std::int64_t> min_output_bytes{StreamingPolicy{}.min_output_bytes};
std::atomic<int> min_element_bytes{StreamingPolicy{}.min_element_bytes};
std::atomic<std::int64_t> min_row_elements{StreamingPolicy{}.min_row_elements};
}  // namespace

void set_streaming_policy(const StreamingPolicy &policy) {
    min_output_bytes.store(policy.min_output_bytes, std::memory_order_relaxed);
    min_element_bytes.store(policy.min_element_bytes, std::memory_order_relaxed);
    min_row_elements.store(policy.min_row_elements, std::memory_order_relaxed);
}

StreamingPolicy streaming_policy() {
    return {min_output_bytes.load(std::memory_order_relaxed), min_element_bytes.load(std::memory_order_relaxed),
            min_row_elements.load(std::memory_order_relaxed)};
}

namespace detail {

namespace {

// Output bytes per slice: its scratch stays in this core's L2 (512 KiB on the machine measured)
// between the variant's stores and the streaming copy. Measured, final norm f32 [4096, 12288],
// 2 threads, fraction of an ordinary-store copy in the same run: 64 KiB 0.94, 128 KiB 0.95,
// 256 KiB 0.91 (noise about +-0.05); mHC bf16 -> f32: 0.82, 0.87, 0.89.
constexpr std::int64_t kSliceOutputBytes = 128 * 1024;

// Slices a task runs one after the other, so that each slice's copy knows the next slice's
// input and can prefetch it.
constexpr std::int64_t kSlicesPerTask = 8;

// Input memory that the next slice reads, or none.
struct Span {
    const std::uint8_t *begin = nullptr;
    std::size_t bytes = 0;
};

// Copies `bytes` to `dst`; its 16-byte-aligned body with non-temporal stores (SSE2, present on
// every x86-64), which write lines without reading them first. Spread over the copy, it
// prefetches `next`: a slice is otherwise a read phase (the variant's first pass over its rows)
// then a write phase (this copy), and memory sits half idle in each.
void stream_copy(std::uint8_t *dst, const std::uint8_t *src, std::size_t bytes, Span next) {
#if defined(__x86_64__)
    constexpr std::size_t kLine = 64;
    const std::size_t lines = (next.bytes + kLine - 1) / kLine;
    std::size_t prefetched = 0;
    const auto prefetch_until = [&](std::size_t line) {
        for (; prefetched < line; ++prefetched) {
            _mm_prefetch(reinterpret_cast<const char *>(next.begin + prefetched * kLine), _MM_HINT_T0);
        }
    };
    const std::size_t head = std::min<std::size_t>(bytes, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
    std::memcpy(dst, src, head);
    std::size_t i = head;
    for (; i + kLine <= bytes; i += kLine) {
        for (std::size_t j = 0; j < kLine; j += 16) {
            _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + j),
                             _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + j)));
        }
        prefetch_until(lines * (i + kLine) / bytes);
    }
    for (; i + 16 <= bytes; i += 16) {
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i)));
    }
    std::memcpy(dst + i, src + i, bytes - i);
    prefetch_until(lines);
#else
    (void)next;
    std::memcpy(dst, src, bytes);
#endif
}

struct StreamJob {
    KernelFn fn;
    const KernelCall *call;
    std::int64_t tokens_per_slice;
    std::int64_t slices;
};

std::int64_t token_elements(const KernelLayout &l) { return l.extent[0] * l.extent[1] * l.extent[2]; }

std::int64_t out_token_bytes(const KernelCall &c) {
    return token_elements(c.layout) * static_cast<std::int64_t>(dtype_size(c.out_dtype));
}

// The input of `slice` as one span, when there is such a slice and its tokens lie within twice
// their own size (dense, or nearly: a span full of gaps is not worth prefetching).
Span input_span(const StreamJob &job, std::int64_t slice) {
    const KernelCall &c = *job.call;
    const KernelLayout &l = c.layout;
    const std::int64_t t0 = slice * job.tokens_per_slice;
    if (t0 >= l.extent[3]) return {};
    const std::int64_t tokens = std::min(job.tokens_per_slice, l.extent[3] - t0);
    std::int64_t last = (tokens - 1) * l.x_stride[3];
    for (int i = 0; i < 4; ++i) {
        if (l.x_stride[i] < 0) return {};
        if (i < 3) last += (l.extent[i] - 1) * l.x_stride[i];
    }
    if (last + 1 > 2 * tokens * token_elements(l)) return {};
    const auto in_elem = static_cast<std::int64_t>(dtype_size(c.in_dtype));
    return {static_cast<const std::uint8_t *>(c.x) + t0 * l.x_stride[3] * in_elem,
            static_cast<std::size_t>((last + 1) * in_elem)};
}

int run_slice(const StreamJob &job, std::int64_t slice, Span next) {
    const KernelCall &c = *job.call;
    const KernelLayout &l = c.layout;
    const std::int64_t t0 = slice * job.tokens_per_slice;
    const std::int64_t tokens = std::min(job.tokens_per_slice, l.extent[3] - t0);
    const std::int64_t in_elem = static_cast<std::int64_t>(dtype_size(c.in_dtype));
    const std::int64_t out_elem = static_cast<std::int64_t>(dtype_size(c.out_dtype));

    // The slice's tokens keep their absolute index (buffer min t0), so group starts and ids
    // apply unchanged; the output goes to a dense scratch of the slice's shape.
    thread_local std::vector<std::uint8_t> scratch;
    scratch.resize(static_cast<std::size_t>(tokens * out_token_bytes(c)));
    KernelArgs k(c);
    k.x.set_dim(3, t0, tokens, l.x_stride[3]);
    k.x.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(c.x)) + t0 * l.x_stride[3] * in_elem;
    k.scale.buffer.host = reinterpret_cast<std::uint8_t *>(const_cast<float *>(c.scale));
    k.ids.buffer.host = reinterpret_cast<std::uint8_t *>(const_cast<std::int32_t *>(c.token_ids ? c.token_ids : c.zero_id));
    k.out.set_dim(0, 0, l.extent[0], 1);
    k.out.set_dim(1, 0, l.extent[1], l.extent[0]);
    k.out.set_dim(2, 0, l.extent[2], l.extent[0] * l.extent[1]);
    k.out.set_dim(3, t0, tokens, token_elements(l));
    k.out.buffer.host = scratch.data();
    int status;
    {
        InlineParallelLoops inline_loops;
        status = job.fn(k.pack());
    }
    if (status != 0) return status;

    // Copy in runs as long as the output allows: the whole slice when its tokens are dense
    // (the usual case), else one token, else one row (small rows make many short runs).
    const std::int64_t row = l.extent[0];
    const bool dense_token = (l.extent[1] == 1 || l.out_stride[1] == row) &&
                             (l.extent[2] == 1 || l.out_stride[2] == row * l.extent[1]);
    const bool dense_slice = dense_token && l.out_stride[3] == token_elements(l);
    const std::uint8_t *src = scratch.data();
    auto *out = static_cast<std::uint8_t *>(c.out);
    if (dense_slice) {
        stream_copy(out + t0 * l.out_stride[3] * out_elem, src, scratch.size(), next);
    } else {
        const std::size_t run_bytes = static_cast<std::size_t>((dense_token ? token_elements(l) : row) * out_elem);
        for (std::int64_t t = t0; t < t0 + tokens; ++t) {
            for (std::int64_t a = 0; a < (dense_token ? 1 : l.extent[2]); ++a) {
                for (std::int64_t h = 0; h < (dense_token ? 1 : l.extent[1]); ++h, src += run_bytes) {
                    const std::int64_t first = t * l.out_stride[3] + a * l.out_stride[2] + h * l.out_stride[1];
                    stream_copy(out + first * out_elem, src, run_bytes, {});
                }
            }
        }
    }
#if defined(__x86_64__)
    // Streaming stores are weakly ordered: make them visible before the slice reports done.
    _mm_sfence();
#endif
    return 0;
}

int run_task(void *, int task, std::uint8_t *closure) {
    const auto &job = *reinterpret_cast<const StreamJob *>(closure);
    const std::int64_t first = task * kSlicesPerTask, end = std::min(first + kSlicesPerTask, job.slices);
    for (std::int64_t slice = first; slice < end; ++slice) {
        const int status = run_slice(job, slice, slice + 1 < end ? input_span(job, slice + 1) : Span{});
        if (status != 0) return status;
    }
    return 0;
}

}  // namespace

bool streams_output(const KernelCall &c) {
    if (c.backend != Backend::cpu || c.memory != Memory::host) return false;
    const StreamingPolicy policy = streaming_policy();
    const KernelLayout &l = c.layout;
    return policy.min_output_bytes > 0 && l.out_stride[0] == 1 && l.extent[3] > 1 &&
           out_token_bytes(c) * l.extent[3] >= policy.min_output_bytes &&
           static_cast<std::int64_t>(dtype_size(c.out_dtype)) >= policy.min_element_bytes &&
           l.extent[0] >= policy.min_row_elements;
}

int run_streamed(KernelFn fn, const KernelCall &c) {
    const std::int64_t tokens_per_slice =
        std::max<std::int64_t>(1, kSliceOutputBytes / std::max<std::int64_t>(1, out_token_bytes(c)));
    const StreamJob job{fn, &c, tokens_per_slice, (c.layout.extent[3] + tokens_per_slice - 1) / tokens_per_slice};
    const std::int64_t tasks = (job.slices + kSlicesPerTask - 1) / kSlicesPerTask;
    CallContext context;
    return halide_do_par_for(&context, run_task, 0, static_cast<int>(tasks),
                             reinterpret_cast<std::uint8_t *>(const_cast<StreamJob *>(&job)));
}

}  // namespace detail
}  // namespace magi2norm
