// The project's Halide algorithm (generators/magi2_norm_generator.cpp) with its hand-written
// schedule replaced by each of Halide's autoschedulers: same algorithm, same data, only the
// schedule differs. benchmarks/CMakeLists.txt builds one library per (autoscheduler, dtype
// pair, size class) the cases use, sharing the library's Halide runtime and so its thread pool;
// a call runs the library planned for the largest class that fits it (schedules planned for
// larger calls fail on smaller ones). They are called as runtime/src/variants/kernels.cpp calls the
// shipped variants: 4-D (d, h, a, t) buffers over the caller's memory, then user_context, x,
// scale, token_modality, group_start_1..15, eps, out. The user_context is a CallContext with the
// library's process-wide loop and thread count: the library's Halide runtime sends every
// parallel loop to its own (runtime/src/devices/threads.cpp), which reads it.
#include <array>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "HalideRuntime.h"
#include "magi2norm/internal.hpp"
#include "implementation.hpp"
#include "magi2norm_auto_peer_headers.h"

namespace magi2norm::bench {

namespace {

// Grouping by sizes passes the first token of modalities 1..15 (generator: kMaxGroups = 16).
constexpr int kGroupStarts = 15;

using KernelFn = int (*)(void **args);

struct AutoKernel {
    const char *scheduler;
    std::int64_t estimate_tokens, estimate_dim;  // the size its schedule was planned for
    DType in, out;
    KernelFn fn;
};

#define MAGI2NORM_AUTO_PEER(scheduler, tokens, dim, in, out) \
    {#scheduler, tokens, dim, DType::in, DType::out,      \
     magi2_norm_auto_##scheduler##_t##tokens##_d##dim##_##in##_##out##_argv},
// A vector, not an array: a build without autoschedulers lists none.
const std::vector<AutoKernel> kKernels = {
#include "magi2norm_auto_peer_list.inc"
};
#undef MAGI2NORM_AUTO_PEER

// Halide reports why a call failed through the process-wide error handler, which the library
// has taken (it runs a norm before the peers are made, see bench_main.cpp). This one keeps the
// message for the failing peer's error and passes it on to the library's.
thread_local std::string last_halide_error;
halide_error_handler_t library_error_handler = nullptr;

void capture_halide_error(void *user_context, const char *message) {
    last_halide_error = message;
    if (library_error_handler != nullptr) library_error_handler(user_context, message);
}

// The kernel of `scheduler` for the case's dtypes planned for the largest size within the
// case's: the most tokens, then the longest rows.
const AutoKernel *find_kernel(const std::string &scheduler, const Case &c) {
    const AutoKernel *best = nullptr;
    for (const AutoKernel &k : kKernels) {
        if (scheduler != k.scheduler || k.in != c.in || k.out != c.out) continue;
        if (k.estimate_tokens > c.tokens || k.estimate_dim > c.dim()) continue;
        if (best == nullptr || std::pair(k.estimate_tokens, k.estimate_dim) > std::pair(best->estimate_tokens, best->estimate_dim)) {
            best = &k;
        }
    }
    return best;
}

halide_type_t storage_type(DType dtype) {
    return dtype == DType::f32 ? halide_type_t(halide_type_float, 32) : halide_type_t(halide_type_uint, 16);
}

// A halide_buffer_t with its dimensions stored alongside; not copyable (buffer.dim points in).
template <int N>
struct HalideView {
    halide_buffer_t buffer{};
    halide_dimension_t dims[N]{};

    HalideView(halide_type_t type, const std::array<std::int64_t, N> &extents, const std::array<std::int64_t, N> &strides) {
        buffer.type = type;
        buffer.dimensions = N;
        buffer.dim = dims;
        for (int i = 0; i < N; ++i) {
            dims[i] = halide_dimension_t(0, static_cast<std::int32_t>(extents[i]), static_cast<std::int32_t>(strides[i]));
        }
    }
    HalideView(const HalideView &) = delete;
    HalideView &operator=(const HalideView &) = delete;
};

class AutoRunner : public Runner {
public:
    AutoRunner(Workspace &ws, KernelFn fn)
        : ws_(ws),
          fn_(fn),
          // A contiguous [T, H, D] tensor as (d, h, a, t); the middle axis a is unused.
          x_(storage_type(ws.spec().in), extents(ws.spec()), strides(ws.spec())),
          out_(storage_type(ws.spec().out), extents(ws.spec()), strides(ws.spec())),
          // scale (d, h, m): the one row per modality broadcasts over the heads (stride 0).
          scale_(halide_type_t(halide_type_float, 32), {ws.spec().dim(), ws.spec().rows_per_token(), ws.spec().num_modality},
                 {1, 0, ws.spec().dim()}),
          // Without per-token ids every token reads id 0 through a stride-0 view of one zero.
          ids_(halide_type_t(halide_type_int, 32), {ws.spec().tokens}, {ws.token_ids().empty() ? 0 : 1}) {
        scale_.buffer.host = reinterpret_cast<std::uint8_t *>(const_cast<float *>(ws.scale().data()));
        ids_.buffer.host = reinterpret_cast<std::uint8_t *>(
            ws.token_ids().empty() ? &zero_id_ : const_cast<std::int32_t *>(ws.token_ids().data()));
        starts_.fill(std::numeric_limits<std::int32_t>::max());
        if (ws.spec().grouping == GroupingKind::sizes) {
            std::int64_t start = 0;
            for (std::size_t m = 0; m + 1 < ws.group_sizes().size(); ++m) {
                start += ws.group_sizes()[m];
                starts_[m] = static_cast<std::int32_t>(start);
            }
        }
        detail::resolve_parallel_loop(call_, std::nullopt, std::nullopt);
        user_context_ = &call_;
        std::size_t n = 0;
        args_[n++] = &user_context_;
        args_[n++] = &x_.buffer;
        args_[n++] = &scale_.buffer;
        args_[n++] = &ids_.buffer;
        for (std::int32_t &s : starts_) args_[n++] = &s;
        args_[n++] = &eps_;
        args_[n++] = &out_.buffer;
    }

    const void *run(std::size_t pair) override {
        x_.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(ws_.x(pair)));
        out_.buffer.host = static_cast<std::uint8_t *>(ws_.out(pair));
        last_halide_error.clear();
        const int status = fn_(args_.data());
        if (status != 0) {
            throw std::runtime_error("autoscheduled kernel failed (Halide status " + std::to_string(status) +
                                     "): " + last_halide_error);
        }
        return ws_.out(pair);
    }

private:
    static std::array<std::int64_t, 4> extents(const Case &c) { return {c.dim(), c.rows_per_token(), 1, c.tokens}; }
    static std::array<std::int64_t, 4> strides(const Case &c) {
        const std::int64_t token = c.rows_per_token() * c.dim();
        return {1, c.dim(), token, token};
    }

    Workspace &ws_;
    KernelFn fn_;
    HalideView<4> x_, out_;
    HalideView<3> scale_;
    HalideView<1> ids_;
    std::int32_t zero_id_ = 0;
    std::array<std::int32_t, kGroupStarts> starts_{};
    detail::CallContext call_;
    void *user_context_ = nullptr;
    float eps_ = kEps;
    std::array<void *, 1 + 3 + kGroupStarts + 2> args_{};
};

}  // namespace

std::vector<Implementation> halide_autoscheduler_peers() {
    library_error_handler = halide_set_error_handler(capture_halide_error);
    std::vector<Implementation> peers;
    for (const AutoKernel &k : kKernels) {
        const std::string scheduler = k.scheduler;
        if (!peers.empty() && peers.back().name == "halide_" + scheduler) continue;
        peers.push_back({"halide_" + scheduler, num_threads(),
                         [scheduler](const Case &c) { return find_kernel(scheduler, c) != nullptr; },
                         [scheduler](Workspace &ws) {
                             return std::make_unique<AutoRunner>(ws, find_kernel(scheduler, ws.spec())->fn);
                         }});
    }
    return peers;
}

}  // namespace magi2norm::bench
