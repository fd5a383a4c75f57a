// The argument pack of one call of a variant: halide_buffer_t descriptors of the planned layout
// (memory is attached by run_kernel, no data is copied) and the pointer array that every
// variant's _argv entry point takes.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "call_plan.hpp"
#include "halide_calls.hpp"

namespace magi2norm::detail {

// A halide_buffer_t with its dimensions stored alongside; `host` is set by the caller.
template <int N>
struct HalideBuffer {
    halide_buffer_t buffer{};
    halide_dimension_t dims[N]{};

    explicit HalideBuffer(halide_type_t type) {
        buffer.type = type;
        buffer.dimensions = N;
        buffer.dim = dims;
    }
    HalideBuffer(const HalideBuffer &) = delete;
    HalideBuffer &operator=(const HalideBuffer &) = delete;
};

struct KernelArgs {
    HalideBuffer<4> x, out;
    HalideBuffer<3> scale;
    HalideBuffer<1> ids;  // without per-token ids: a stride-0 view of one zero
    CallContext context;
    void *user_context = &context;
    std::array<std::int32_t, abi::kMaxGroups - 1> starts;
    float eps;
    std::array<void *, 1 + 3 + abi::kMaxGroups - 1 + 2> args{};

    // The planned descriptors of `form`; run_kernel attaches the memory.
    KernelArgs(const CallPlan &plan, Form form, const CallContext &call)
        : x(plan.buffers[static_cast<int>(form)].x_type), out(plan.buffers[static_cast<int>(form)].out_type),
          scale(halide_type_t(halide_type_float, 32)), ids(halide_type_t(halide_type_int, 32)), context(call),
          starts(plan.group_starts), eps(plan.norm->config.eps) {
        const KernelBuffers &b = plan.buffers[static_cast<int>(form)];
        std::copy(b.x.begin(), b.x.end(), x.dims);
        std::copy(b.out.begin(), b.out.end(), out.dims);
        std::copy(b.scale.begin(), b.scale.end(), scale.dims);
        ids.dims[0] = b.ids;
    }
    KernelArgs(const KernelArgs &) = delete;
    KernelArgs &operator=(const KernelArgs &) = delete;

    void **pack() {
        std::size_t n = 0;
        args[n++] = &user_context;
        args[n++] = &x.buffer;
        args[n++] = &scale.buffer;
        args[n++] = &ids.buffer;
        for (std::int32_t &start : starts) args[n++] = &start;
        args[n++] = &eps;
        args[n++] = &out.buffer;
        return args.data();
    }
};

}  // namespace magi2norm::detail
