#include "call_checks.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "../devices/opencl_context.hpp"
#include "../views/overlap.hpp"
#include "backward_plan.hpp"

namespace magi2norm::detail {

namespace {

// Checks a grouping by sizes (M sizes, each >= 0, summing to the token count) and hands each
// modality's tokens to `group(m, first, size)`, m = 0 .. M-1, in order.
template <typename Group>
void walk_group_sizes(const NormConfig &config, const Grouping &grouping, std::int64_t tokens, Group &&group) {
    const auto &sizes = grouping.group_sizes();
    if (static_cast<std::int64_t>(sizes.size()) != config.num_modality) {
        throw Error(ErrorCode::grouping, "got " + std::to_string(sizes.size()) + " group sizes for num_modality " +
                                             std::to_string(config.num_modality));
    }
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        if (sizes[m] < 0) {
            throw Error(ErrorCode::grouping, "group size " + std::to_string(m) + " is negative (" + std::to_string(sizes[m]) + ")");
        }
    }
    std::int64_t first = 0;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        if (sizes[m] > tokens - first) {
            throw Error(ErrorCode::grouping, "group sizes sum past the token count " + std::to_string(tokens));
        }
        group(m, first, sizes[m]);
        first += sizes[m];
    }
    if (first != tokens) {
        throw Error(ErrorCode::grouping, "group sizes sum to " + std::to_string(first) + " but the input has " +
                                             std::to_string(tokens) + " tokens");
    }
}

// Where `bytes` lie in an OpenCL buffer `mem`, which must hold them all (OpenCL checks nothing
// when the kernel runs): else Error(`code`), "`what` <bytes> bytes but the OpenCL buffer holds
// <size>". Nothing is looked up for 0 bytes (an empty view's handle may be null).
Region cl_region(const void *mem, std::uint64_t bytes, ErrorCode code, const std::string &what) {
    if (bytes == 0) return {};
    const auto extent = opencl_extent(mem);
    if (bytes > extent.size) {
        throw Error(code, what + " " + std::to_string(bytes) + " bytes but the OpenCL buffer holds " + std::to_string(extent.size));
    }
    return {extent.root, extent.offset, extent.offset + bytes};
}

}  // namespace

// Where the views are and what runs them: the memory agrees across views and backend, and views
// of OpenCL buffers (a cl_mem is a handle: a view starts at its buffer's first byte) come with
// the host's queue and strides >= 0.
void plan_backend(CallPlan &p, const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
                  const Stream &stream) {
    p.backend = stream.backend ? *stream.backend : default_backend();
    p.memory = x.memory;
    if (x.memory != out.memory || (grouping.kind() == Grouping::Kind::ids && grouping.ids_memory() != x.memory)) {
        throw Error(ErrorCode::device, "input, output and modality ids must all be in host memory or all in device memory");
    }
    if (p.memory == Memory::device && p.backend == Backend::cpu) {
        throw Error(ErrorCode::device, "device-memory views need the cuda or opencl backend, not cpu");
    }
    p.cl_buffers = p.memory == Memory::device && p.backend == Backend::opencl;
    if (p.cl_buffers) {
        if (stream.stream == nullptr) {
            throw Error(ErrorCode::device, "views of OpenCL buffers need the host's command queue (Stream::stream)");
        }
        for (const auto &[view, what] : {std::pair{&p.x, "input"}, std::pair{&p.out, "output"}}) {
            if (has_negative_stride(*view)) {
                throw Error(ErrorCode::stride, std::string(what) + " " + shape_string(view->shape) +
                                                   " is an OpenCL buffer, which a view starts at the first byte of, so its strides must be >= 0");
            }
        }
    }
    if (p.memory == Memory::device) {
        p.gpu_context = p.cl_buffers ? (stream.context ? stream.context : opencl_queue_context(stream.stream))
                                     : resolve_cuda_context(stream.context);
        p.gpu_stream = stream.stream;
    }
}

// The elements of a view at `data`: host addresses, or the part of its OpenCL buffer it covers
// (strides >= 0, so [0, hi) of the buffer).
Region view_region(const CallPlan &p, const CheckedView &v, const void *data, const char *what) {
    if (!p.cl_buffers) return host_region(v, data, what);
    if (v.count > 0 && data == nullptr) throw Error(ErrorCode::null_data, std::string(what) + " data pointer is null");
    Region r = cl_region(data, static_cast<std::uint64_t>(v.hi_bytes), ErrorCode::shape, std::string(what) + " view needs");
    r.elem_bytes = static_cast<std::int64_t>(dtype_size(v.dtype));
    r.shape = &v.shape;
    r.strides = &v.strides;
    return r;
}

// The grouping's kernel arguments: group starts (by sizes, up to kMaxGroups modalities), per-token
// ids made here (by sizes past that, host memory only), or the caller's ids at run time.
void plan_grouping(CallPlan &p, const NormConfig &config, const Grouping &grouping) {
    if (!p.layout.has_token_axis) {
        if (config.num_modality > 1) {
            throw Error(ErrorCode::grouping, "num_modality > 1 needs a token axis separate from the pattern axis; the input " +
                                                 shape_string(p.x.shape) + " has none");
        }
        if (grouping.kind() != Grouping::Kind::none) {
            throw Error(ErrorCode::grouping, "grouping needs a token axis; the input " + shape_string(p.x.shape) + " has none");
        }
    }
    if (config.num_modality > 1 && grouping.kind() == Grouping::Kind::none) {
        throw Error(ErrorCode::grouping, "num_modality is " + std::to_string(config.num_modality) +
                                             " but no grouping (group sizes or modality ids) was given");
    }
    p.tokens = p.layout.extent[3];
    p.group_starts.fill(std::numeric_limits<std::int32_t>::max());
    if (grouping.kind() == Grouping::Kind::ids) {
        if (grouping.num_tokens() != p.tokens) {
            throw Error(ErrorCode::grouping, "got " + std::to_string(grouping.num_tokens()) + " modality ids for " +
                                                 std::to_string(p.tokens) + " tokens");
        }
        p.checks_ids = true;
        // With one modality every id is 0 (the kernel clamps any id to [0, M)): none are passed.
        p.takes_ids = config.num_modality > 1;
        return;
    }
    if (grouping.kind() != Grouping::Kind::sizes) return;
    const bool as_starts = config.num_modality <= abi::kMaxGroups;
    if (!as_starts && p.memory == Memory::device) {
        throw Error(ErrorCode::grouping, "with device memory, grouping by sizes supports up to " +
                                             std::to_string(abi::kMaxGroups) + " modalities (num_modality is " +
                                             std::to_string(config.num_modality) + "); pass per-token ids");
    }
    if (!as_starts) p.ids_from_sizes.resize(static_cast<std::size_t>(p.tokens));
    walk_group_sizes(config, grouping, p.tokens, [&](std::size_t m, std::int64_t first, std::int64_t size) {
        if (!as_starts) {
            std::fill_n(p.ids_from_sizes.begin() + first, size, static_cast<std::int32_t>(m));
        } else if (m > 0) {
            p.group_starts[m - 1] = static_cast<std::int32_t>(first);
        }
    });
}

// Per-token ids: the pointer, its place apart from each view the call writes (the kernel writes
// them while it reads the ids), then their values where the host can read them (device ids are
// clamped to [0, M) by the kernel).
void check_ids(const CallPlan &p, const std::int32_t *ids, std::initializer_list<WrittenRegion> written) {
    if (p.tokens == 0) return;
    if (ids == nullptr) throw Error(ErrorCode::null_data, "modality ids pointer is null");
    const auto bytes = static_cast<std::uint64_t>(p.tokens) * sizeof(std::int32_t);
    const std::string what = "modality ids for " + std::to_string(p.tokens) + " tokens need";
    const Dims shape(1, p.tokens), strides(1, 1);
    Region span = p.cl_buffers ? cl_region(ids, bytes, ErrorCode::grouping, what)
                               : Region{nullptr, reinterpret_cast<std::uintptr_t>(ids), reinterpret_cast<std::uintptr_t>(ids) + bytes};
    span.elem_bytes = sizeof(std::int32_t);
    span.shape = &shape;
    span.strides = &strides;
    for (const WrittenRegion &w : written) check_disjoint(span, "modality ids", *w.region, w.what, "the kernel would overwrite ids it reads");
    if (p.memory == Memory::host) check_id_values(ids, p.tokens, p.norm->config.num_modality);
}

void check_id_values(const std::int32_t *ids, std::int64_t tokens, std::int64_t num_modality) {
    for (std::int64_t t = 0; t < tokens; ++t) {
        if (ids[t] < 0 || ids[t] >= num_modality) {
            throw Error(ErrorCode::modality_id, "token " + std::to_string(t) + " has modality id " + std::to_string(ids[t]) +
                                                    ", outside [0, " + std::to_string(num_modality) + ")");
        }
    }
}

CheckedView plan_inverse_rms_view(CallPlan &p, const NormConfig &config, const ConstTensorView &inv) {
    if (inv.memory != p.memory) throw Error(ErrorCode::device, "the inverse RMS must be in the same memory as the call's other views");
    CheckedView v;
    check_geometry(v, inv.dtype, inv.shape, inv.strides, "inverse RMS");
    plan_inverse_rms(p.layout, config, p.out, v);
    return v;
}

namespace {

// Whether dx is dy itself: the same memory, element size and layout, one dx row per dy row.
bool in_place(const BackwardPlan &g, const void *dy, const void *dx) {
    if (dx != dy || dtype_size(g.dx.dtype) != dtype_size(g.p.out.dtype) || g.heads_per_dx_row != 1) return false;
    for (int axis = 0; axis < 4; ++axis) {
        if (g.p.layout.extent[axis] > 1 && g.dx_stride[axis] != g.p.layout.out_stride[axis]) return false;
    }
    return true;
}

}  // namespace

void check_backward_pointers(const BackwardPlan &g, const void *x, const void *dy, const void *dx, const void *dweight,
                             const std::int32_t *ids) {
    const bool dx_is_dy = in_place(g, dy, dx);
    const Region xs = view_region(g.p, g.p.x, x, "input"), dys = view_region(g.p, g.p.out, dy, "dy");
    const Region dxs = view_region(g.p, g.dx, dx, "dx"), dws = view_region(g.p, g.dweight, dweight, "dweight");
    check_disjoint(dxs, "dx", xs, "input", "dx is written while the input is read");
    if (!dx_is_dy) {
        check_disjoint(dxs, "dx", dys, "dy", "dx may be dy itself, in the same element size and layout, and else shares no byte with it");
    }
    const char *written = "dweight is written while the other views are read or written";
    check_disjoint(dws, "dweight", xs, "input", written);
    check_disjoint(dws, "dweight", dys, "dy", written);
    check_disjoint(dws, "dweight", dxs, "dx", written);
    if (g.inverse_rms) {
        const Region invs = view_region(g.p, *g.inverse_rms, g.inverse_rms_data, "inverse RMS");
        check_disjoint(dxs, "dx", invs, "inverse RMS", "dx is written while the inverse RMS is read");
        check_disjoint(dws, "dweight", invs, "inverse RMS", written);
    }
    if (g.p.checks_ids) {
        check_ids(g.p, ids, {{&dxs, "dx"}, {&dws, "dweight"}});
    }
}

}  // namespace magi2norm::detail
