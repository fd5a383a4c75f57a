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

// Copies `bytes` to `dst`; its 16-byte-aligned body with non-temporal stores (SSE2, present on
// every x86-64), which write lines without reading them first.
void stream_copy(std::uint8_t *dst, const std::uint8_t *src, std::size_t bytes) {
#if defined(__x86_64__)
    const std::size_t head = std::min<std::size_t>(bytes, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
    std::memcpy(dst, src, head);
    std::size_t i = head;
    for (; i + 16 <= bytes; i += 16) {
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i)));
    }
    std::memcpy(dst + i, src + i, bytes - i);
#else
    std::memcpy(dst, src, bytes);
#endif
}

struct StreamJob {
    KernelFn fn;
    const KernelCall *call;
    std::int64_t tokens_per_slice;
};

std::int64_t token_elements(const KernelLayout &l) { return l.extent[0] * l.extent[1] * l.extent[2]; }

std::int64_t out_token_bytes(const KernelCall &c) {
    return token_elements(c.layout) * static_cast<std::int64_t>(dtype_size(c.out_dtype));
}

int run_slice(void *, int slice, std::uint8_t *closure) {
    const auto &job = *reinterpret_cast<const StreamJob *>(closure);
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
        stream_copy(out + t0 * l.out_stride[3] * out_elem, src, scratch.size());
    } else {
        const std::size_t run_bytes = static_cast<std::size_t>((dense_token ? token_elements(l) : row) * out_elem);
        for (std::int64_t t = t0; t < t0 + tokens; ++t) {
            for (std::int64_t a = 0; a < (dense_token ? 1 : l.extent[2]); ++a) {
                for (std::int64_t h = 0; h < (dense_token ? 1 : l.extent[1]); ++h, src += run_bytes) {
                    const std::int64_t first = t * l.out_stride[3] + a * l.out_stride[2] + h * l.out_stride[1];
                    stream_copy(out + first * out_elem, src, run_bytes);
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
    StreamJob job{fn, &c, std::max<std::int64_t>(1, kSliceOutputBytes / std::max<std::int64_t>(1, out_token_bytes(c)))};
    const std::int64_t slices = (c.layout.extent[3] + job.tokens_per_slice - 1) / job.tokens_per_slice;
    CallContext context;
    return halide_do_par_for(&context, run_slice, 0, static_cast<int>(slices), reinterpret_cast<std::uint8_t *>(&job));
}

}  // namespace detail
}  // namespace magi2norm
