// The backward's Halide peer (autodiff_peer_generator.cpp): Halide::propagate_adjoints of the
// forward formula, scheduled by an autoscheduler, one library per (autoscheduler, case, tokens
// of one modality) that benchmarks/CMakeLists.txt builds. Called once per modality on that
// modality's tokens (3-D (d, h, t) views over the caller's memory) with its scale row
// w[m] + 1, writing dx in place and that modality's row of the weight gradient. The library's
// Halide runtime routes every parallel loop through its own (runtime/src/devices/threads.cpp), which
// reads the call's CallContext from user_context: the peer passes one with the library's
// process-wide loop and thread count, so it runs on the same pool with as many threads.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "HalideRuntime.h"
#include "backward_peers.hpp"
#include "magi2norm/internal.hpp"
#include "magi2norm_autodiff_peer_headers.h"

namespace magi2norm::bench {

namespace {

using KernelFn = int (*)(void const *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float, halide_buffer_t *,
                         halide_buffer_t *);

struct AutodiffKernel {
    const char *scheduler;
    const char *norm;
    std::int64_t tokens;  // the size its schedule was planned for, and the only one it runs
    DType x, dy, dx;
    std::int64_t rows, dim;
    KernelFn fn;
};

#define MAGI2NORM_AUTODIFF_PEER(scheduler, norm, tokens, x, dy, dx, rows, dim) \
    {#scheduler, #norm, tokens, DType::x, DType::dy, DType::dx, rows, dim, magi2_norm_autodiff_##scheduler##_##norm##_t##tokens},
const std::vector<AutodiffKernel> kKernels = {
#include "magi2norm_autodiff_peer_list.inc"
};
#undef MAGI2NORM_AUTODIFF_PEER

constexpr float kPeerEps = 1e-6f;

const AutodiffKernel *find_kernel(const std::string &scheduler, const BackwardProblem &p, std::int64_t tokens) {
    for (const AutodiffKernel &k : kKernels) {
        if (scheduler == k.scheduler && p.norm == k.norm && k.tokens == tokens && k.x == p.x && k.dy == p.dy && k.dx == p.dx &&
            k.rows == p.rows && k.dim == p.dim) {
            return &k;
        }
    }
    return nullptr;
}

bool supported(const std::string &scheduler, const BackwardProblem &p) {
    for (const std::int64_t size : p.sizes) {
        if (size > 0 && find_kernel(scheduler, p, size) == nullptr) return false;
    }
    return true;
}

halide_type_t storage_type(DType dtype) {
    return dtype == DType::f32 ? halide_type_t(halide_type_float, 32) : halide_type_t(halide_type_uint, 16);
}

// A halide_buffer_t with its dimensions alongside; not copyable (buffer.dim points in).
struct View {
    halide_buffer_t buffer{};
    halide_dimension_t dims[3]{};

    View(halide_type_t type, void *host, std::int64_t dim, std::int64_t rows, std::int64_t tokens) {
        buffer.type = type;
        buffer.host = static_cast<std::uint8_t *>(host);
        buffer.dimensions = tokens < 0 ? 1 : 3;
        buffer.dim = dims;
        dims[0] = halide_dimension_t(0, static_cast<std::int32_t>(dim), 1);
        if (tokens >= 0) {
            dims[1] = halide_dimension_t(0, static_cast<std::int32_t>(rows), static_cast<std::int32_t>(dim));
            dims[2] = halide_dimension_t(0, static_cast<std::int32_t>(tokens), static_cast<std::int32_t>(rows * dim));
        }
    }
    View(const View &) = delete;
    View &operator=(const View &) = delete;
};

class AutodiffRunner : public BackwardRunner {
public:
    AutodiffRunner(const std::string &scheduler, const BackwardProblem &p, const std::vector<BackwardBuffers> &sets,
                   const std::vector<float> &weight)
        : p_(p), sets_(sets), scale_(weight), dweight_(weight.size()) {
        for (float &s : scale_) s += 1.0f;  // float32(w + 1), the weight being FP32
        for (const std::int64_t size : p.sizes) kernels_.push_back(size > 0 ? find_kernel(scheduler, p, size) : nullptr);
        detail::resolve_parallel_loop(call_, std::nullopt, std::nullopt);
    }

    Result run(std::size_t set) override {
        const BackwardBuffers &b = sets_[set];
        const std::int64_t token_elements = p_.rows * p_.dim;
        std::int64_t start = 0;
        for (std::size_t m = 0; m < p_.sizes.size(); ++m) {
            const std::int64_t size = p_.sizes[m];
            float *dscale = dweight_.data() + m * p_.dim;
            if (size == 0) {
                std::fill(dscale, dscale + p_.dim, 0.0f);
                continue;
            }
            const std::int64_t offset = start * token_elements;
            View x(storage_type(p_.x), const_cast<std::uint8_t *>(static_cast<const std::uint8_t *>(b.x)) + offset * dtype_size(p_.x),
                   p_.dim, p_.rows, size);
            View dy(storage_type(p_.dy),
                    const_cast<std::uint8_t *>(static_cast<const std::uint8_t *>(b.dy)) + offset * dtype_size(p_.dy), p_.dim,
                    p_.rows, size);
            View dx(storage_type(p_.dx), static_cast<std::uint8_t *>(b.dx) + offset * dtype_size(p_.dx), p_.dim, p_.rows, size);
            View scale(halide_type_t(halide_type_float, 32), scale_.data() + m * p_.dim, p_.dim, 1, -1);
            View dscale_view(halide_type_t(halide_type_float, 32), dscale, p_.dim, 1, -1);
            const int status = kernels_[m]->fn(&call_, &x.buffer, &dy.buffer, &scale.buffer, kPeerEps, &dx.buffer, &dscale_view.buffer);
            if (status != 0) throw std::runtime_error("autodiff peer failed (Halide status " + std::to_string(status) + ")");
            start += size;
        }
        return {b.dx, dweight_.data()};
    }

private:
    BackwardProblem p_;
    std::vector<BackwardBuffers> sets_;
    std::vector<float> scale_, dweight_;
    std::vector<const AutodiffKernel *> kernels_;
    detail::CallContext call_;
};

}  // namespace

std::vector<BackwardPeer> halide_autodiff_peers() {
    std::vector<BackwardPeer> peers;
    for (const AutodiffKernel &k : kKernels) {
        const std::string scheduler = k.scheduler;
        if (!peers.empty() && peers.back().name == "autodiff_" + scheduler) continue;
        peers.push_back({"autodiff_" + scheduler, [scheduler](const BackwardProblem &p) { return supported(scheduler, p); },
                         [scheduler](const BackwardProblem &p, const std::vector<BackwardBuffers> &sets, const std::vector<float> &weight) {
                             return std::unique_ptr<BackwardRunner>(new AutodiffRunner(scheduler, p, sets, weight));
                         }});
    }
    return peers;
}

}  // namespace magi2norm::bench
