#include "backward.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../devices/halide_calls.hpp"
#include "../devices/staging.hpp"
#include "../variants/kernel_args.hpp"
#include "../views/layout.hpp"
#include "../views/overlap.hpp"
#include "../views/views.hpp"
#include "backward_abi.h"
#include "call_checks.hpp"
#include "call_plan.hpp"
#include "magi2norm/float_codecs.hpp"
#include "variant_choice.hpp"

namespace magi2norm::detail {

namespace {

// One call's geometry: the forward's plan of x and dy (dy in the output's place), and dx's.
struct Geometry {
    CallPlan p;
    CheckedView dx, dweight;
    std::array<std::int64_t, 4> dx_stride{};  // on the kernel axes; the head axis is dx's rows
    std::int64_t heads_per_dx_row = 1;        // K: dy rows per dx row (singleton-head broadcasting)
    std::int64_t heads_per_pattern = 1;       // dy rows per scale row: H with P = 1, else 1
    std::int64_t patterns = 1;                // scale rows of a modality
    std::int64_t block_tokens = 1;
    // The forward's inverse RMS of each dy row (BackwardOptions::inverse_rms): its view (strides
    // in p.layout.inv_stride) and data; none: the kernels sum the rows' squares.
    std::optional<CheckedView> inverse_rms;
    const void *inverse_rms_data = nullptr;
};

// The extent of x's pattern axis (SPEC.md's broadcasting, right-aligned): 1 where it broadcasts.
std::int64_t input_pattern_extent(const CheckedView &x, std::size_t out_rank) {
    const std::size_t axis = out_rank - 2, shift = out_rank - x.shape.size();
    return axis < shift ? 1 : x.shape[axis - shift];
}

// Device views are used in place: rows dense (unit stride along d), dy's strides >= 0 in an
// OpenCL buffer as x's and dx's, and dweight contiguous in its row-major order.
void check_device_views(const CallPlan &p, const CheckedView &dweight, const KernelLayout &dx_layout) {
    if (p.cl_buffers && has_negative_stride(p.out)) {
        throw Error(ErrorCode::stride, "dy " + shape_string(p.out.shape) +
                                           " is an OpenCL buffer, which a view starts at the first byte of, so its strides must be >= 0");
    }
    const KernelLayout &l = p.layout;
    if (l.extent[0] > 1 && (l.x_stride[0] != 1 || l.out_stride[0] != 1 || dx_layout.x_stride[0] != 1)) {
        throw Error(ErrorCode::stride, "device-memory views of the backward need unit stride along the normalized axis (input, dy, dx)");
    }
    const Dims dense = contiguous_dims(dweight.shape);
    for (std::size_t i = 0; i < dense.size(); ++i) {
        if (dweight.shape[i] > 1 && dweight.strides[i] != dense[i]) {
            throw Error(ErrorCode::stride, "dweight " + shape_string(dweight.shape) + " in device memory must be contiguous (row-major)");
        }
    }
}

Geometry plan_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                       const TensorView &dx, const TensorView &dweight, const BackwardOptions &options) {
    const NormConfig &config = norm.config;
    Geometry g;
    CallPlan &p = g.p;
    p.norm = &norm;
    check_geometry(p.x, x.dtype, x.shape, x.strides, "input");
    check_geometry(p.out, dy.dtype, dy.shape, dy.strides, "dy");
    check_geometry(g.dx, dx.dtype, dx.shape, dx.strides, "dx");
    check_geometry(g.dweight, dweight.dtype, dweight.shape, dweight.strides, "dweight");
    const Dims expected = output_shape(config, p.x.shape);
    if (p.out.shape != expected) {
        throw Error(ErrorCode::shape, "dy shape is " + shape_string(p.out.shape) + " but input " + shape_string(p.x.shape) +
                                          " gives the output shape " + shape_string(expected));
    }
    if (g.dx.shape != p.x.shape) {
        throw Error(ErrorCode::shape, "dx shape is " + shape_string(g.dx.shape) + " but the input's is " + shape_string(p.x.shape));
    }
    const DType dx_dtype = output_dtype(config, x.dtype, options.dx_dtype.value_or(x.dtype));
    if (g.dx.dtype != dx_dtype) {
        throw Error(ErrorCode::dtype, std::string("dx dtype is ") + dtype_name(g.dx.dtype) + " but the call produces " +
                                          dtype_name(dx_dtype));
    }
    const std::int64_t weight_elements = config.num_modality * config.num_patterns * config.dim;
    if (g.dweight.count != weight_elements) {
        throw Error(ErrorCode::weight, "dweight has " + std::to_string(g.dweight.count) +
                                           " elements but num_modality * num_patterns * dim = " + std::to_string(weight_elements));
    }
    p.backend = options.stream.backend ? *options.stream.backend : default_backend();
    find_backward(p.backend, 0, p.x.dtype, p.out.dtype, g.dx.dtype, false, CallSize{});
    p.layout = plan_layout(config, p.x, p.out);
    const KernelLayout dx_layout = plan_layout(config, g.dx, p.out);
    check_no_self_overlap(g.dx, "dx");
    check_no_self_overlap(g.dweight, "dweight");

    // Host views on any backend (a GPU's staged through the device), device views on a GPU's.
    plan_backend(p, x, grouping, dx, options.stream);
    if (dy.memory != p.memory || dweight.memory != p.memory) {
        throw Error(ErrorCode::device, "input, dy, dx, dweight and modality ids must all be in host memory or all in device memory");
    }
    if (p.memory == Memory::device) check_device_views(p, g.dweight, dx_layout);
    if (options.inverse_rms) {
        const CheckedView &v = g.inverse_rms.emplace(plan_inverse_rms_view(p, config, *options.inverse_rms));
        if (p.cl_buffers && has_negative_stride(v)) {
            throw Error(ErrorCode::stride, "the inverse RMS is an OpenCL buffer, which a view starts at the first byte of, so its strides must be >= 0");
        }
        g.inverse_rms_data = options.inverse_rms->data;
    }
    plan_grouping(p, config, grouping);
    p.num_threads = options.num_threads;
    p.parallel_loop = options.parallel_loop;

    const KernelLayout &l = p.layout;
    g.patterns = config.num_patterns;
    g.heads_per_pattern = config.num_patterns > 1 ? 1 : l.extent[1];
    const bool singleton = config.num_patterns > 1 && l.extent[1] > 1 && input_pattern_extent(p.x, p.out.shape.size()) == 1;
    g.heads_per_dx_row = singleton ? l.extent[1] : 1;
    g.dx_stride = dx_layout.x_stride;
    if (singleton) g.dx_stride[1] = 0;
    g.block_tokens = partial_block_tokens(g.heads_per_pattern * l.extent[2]);
    return g;
}

// Whether dx is dy itself: the same memory, element size and layout, one dx row per dy row.
bool in_place(const Geometry &g, const void *dy, const void *dx) {
    if (dx != dy || dtype_size(g.dx.dtype) != dtype_size(g.p.out.dtype) || g.heads_per_dx_row != 1) return false;
    for (int axis = 0; axis < 4; ++axis) {
        if (g.p.layout.extent[axis] > 1 && g.dx_stride[axis] != g.p.layout.out_stride[axis]) return false;
    }
    return true;
}

// Pointers: not null, and no memory the call writes shared with any other view or the ids,
// but for dx over dy in place.
void check_pointers(const Geometry &g, const void *x, const void *dy, const void *dx, const void *dweight,
                    const std::int32_t *ids) {
    const Region xs = view_region(g.p, g.p.x, x, "input"), dys = view_region(g.p, g.p.out, dy, "dy");
    const Region dxs = view_region(g.p, g.dx, dx, "dx"), dws = view_region(g.p, g.dweight, dweight, "dweight");
    check_disjoint(dxs, "dx", xs, "input", "dx is written while the input is read");
    if (!in_place(g, dy, dx)) {
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

// The views of one modality's tokens [first, first + count) and its [P, D] scale.
struct Segment {
    std::int64_t first = 0, count = 0;
    const float *scale = nullptr;
    float *partials = nullptr;  // [blocks][P][D]
    std::int64_t blocks = 0;
};

template <int N>
void attach(HalideBuffer<N> &b, const void *data) {
    b.buffer.host = static_cast<std::uint8_t *>(const_cast<void *>(data));
}

// x, dy and dx of `count` tokens as the kernel takes them, from the plan's layout.
void set_views(const Geometry &g, std::int64_t count, HalideBuffer<4> &xb, HalideBuffer<4> &dyb, HalideBuffer<4> &dxb) {
    const KernelLayout &l = g.p.layout;
    for (int axis = 0; axis < 4; ++axis) {
        const std::int64_t extent = axis == 3 ? count : l.extent[axis];
        // Rows are dense (unit stride along d, which a row of one element may not say).
        const auto stride = [&](std::int64_t s) { return axis == 0 ? 1 : s; };
        xb.set_dim(axis, extent, stride(l.x_stride[axis]));
        dyb.set_dim(axis, extent, stride(l.out_stride[axis]));
        dxb.set_dim(axis, axis == 1 ? extent / g.heads_per_dx_row : extent, stride(g.dx_stride[axis]));
    }
}

// The inverse RMS of `count` tokens as the kernels take it, (h, a, t) of the plan's layout; without
// one, a view of one float at stride 0 that the kernels do not use (`given` says which).
struct InverseRms {
    HalideBuffer<3> buffer{halide_type_t(halide_type_float, 32)};
    bool given = false;
    float unused = 0.0f;
};
void set_inverse_rms(const Geometry &g, std::int64_t first, std::int64_t count, InverseRms &inv) {
    const KernelLayout &l = g.p.layout;
    inv.given = g.inverse_rms.has_value();
    for (int axis = 1; axis < 4; ++axis) {
        const std::int64_t extent = axis == 3 ? count : l.extent[axis];
        inv.buffer.set_dim(axis - 1, inv.given ? extent : 1, inv.given ? l.inv_stride[axis] : 0);
    }
    const void *data = inv.given ? static_cast<const float *>(g.inverse_rms_data) + first * l.inv_stride[3] : &inv.unused;
    attach(inv.buffer, data);
}

// The partials' descriptor: [blocks][P][D] (floats on CPUs, doubles on GPUs).
void set_partials(const Geometry &g, std::int64_t blocks, HalideBuffer<3> &b) {
    const std::int64_t dim = g.p.norm->config.dim;
    b.set_dim(0, dim, 1);
    b.set_dim(1, g.patterns, dim);
    b.set_dim(2, blocks, g.patterns * dim);
}

void throw_if_failed(int status, const KernelEntry &kernel) {
    if (status != 0) throw Error(ErrorCode::device, std::string(kernel.name) + " failed: " + take_halide_error());
}

// The CPU variant over one modality's tokens.
void run_segment(const Geometry &g, const KernelEntry &kernel, CallContext &call, const void *x, const void *dy, void *dx,
                 const Segment &s) {
    const KernelLayout &l = g.p.layout;
    const NormConfig &c = g.p.norm->config;
    HalideBuffer<4> xb(storage_type(g.p.x.dtype)), dyb(storage_type(g.p.out.dtype)), dxb(storage_type(g.dx.dtype));
    HalideBuffer<2> scale(halide_type_t(halide_type_float, 32));
    HalideBuffer<3> partials(halide_type_t(halide_type_float, 32));
    set_views(g, s.count, xb, dyb, dxb);
    const auto at = [&](const void *base, std::int64_t stride, DType dtype) {
        return static_cast<const char *>(base) + s.first * stride * static_cast<std::int64_t>(dtype_size(dtype));
    };
    attach(xb, at(x, l.x_stride[3], g.p.x.dtype));
    attach(dyb, at(dy, l.out_stride[3], g.p.out.dtype));
    attach(dxb, at(dx, g.dx_stride[3], g.dx.dtype));
    scale.set_dim(0, c.dim, 1);
    scale.set_dim(1, l.extent[1], c.num_patterns > 1 ? c.dim : 0);
    attach(scale, s.scale);
    set_partials(g, s.blocks, partials);
    attach(partials, s.partials);
    InverseRms inv;
    set_inverse_rms(g, s.first, s.count, inv);

    void *user_context = &call;
    std::int32_t k = static_cast<std::int32_t>(g.heads_per_dx_row), hp = static_cast<std::int32_t>(g.heads_per_pattern);
    std::int32_t block = static_cast<std::int32_t>(g.block_tokens);
    float eps = c.eps;
    void *args[] = {&user_context, &xb.buffer, &dyb.buffer, &inv.buffer.buffer, &scale.buffer, &k, &hp, &block, &eps, &inv.given,
                    &dxb.buffer, &partials.buffer};
    throw_if_failed(kernel.fn(args), kernel);
}

// The GPU form's tables (generators/magi2_norm_backward_generator.cpp): each token's modality,
// the tokens in modality order (stable, as the dispatcher's), each block's first position in
// that order (and, last, the token count), and each modality's first block (M + 1 entries).
struct GpuTables {
    std::vector<std::int32_t> modality, order, block_first;
    std::vector<std::int64_t> modality_blocks;
};

GpuTables gpu_tables(const Geometry &g, std::vector<std::int64_t> sizes, const std::int32_t *ids) {
    const auto tokens = static_cast<std::size_t>(g.p.layout.extent[3]);
    if (ids) {
        std::fill(sizes.begin(), sizes.end(), 0);
        for (std::size_t i = 0; i < tokens; ++i) ++sizes[static_cast<std::size_t>(ids[i])];
    }
    GpuTables t;
    t.modality.resize(tokens);
    std::vector<std::int64_t> next(sizes.size() + 1, 0);
    for (std::size_t m = 0; m < sizes.size(); ++m) next[m + 1] = next[m] + sizes[m];
    for (std::size_t m = 0, i = 0; m < sizes.size(); ++m) {
        for (std::int64_t k = 0; k < sizes[m]; ++k, ++i) t.modality[i] = static_cast<std::int32_t>(m);
    }
    if (ids) std::copy(ids, ids + tokens, t.modality.begin());
    t.order.resize(tokens);
    std::vector<std::int64_t> place(next.begin(), next.end() - 1);
    for (std::size_t i = 0; i < tokens; ++i) t.order[static_cast<std::size_t>(place[t.modality[i]]++)] = static_cast<std::int32_t>(i);
    t.modality_blocks.push_back(0);
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        for (std::int64_t first = next[m]; first < next[m + 1]; first += g.block_tokens) {
            t.block_first.push_back(static_cast<std::int32_t>(first));
        }
        t.modality_blocks.push_back(static_cast<std::int64_t>(t.block_first.size()));
    }
    t.block_first.push_back(static_cast<std::int32_t>(tokens));
    return t;
}

// The GPU variant over every token at once (views in the plan's memory, the tables and the
// partials staged from and to the host); dscale as run_kernels gives it.
std::vector<float> run_gpu(const Geometry &g, const KernelEntry &kernel, CallContext &call, const void *x, const void *dy,
                           void *dx, const GpuTables &t) {
    const NormState &norm = *g.p.norm;
    const NormConfig &c = norm.config;
    const std::int64_t row = g.patterns * c.dim;
    std::vector<float> dscale(static_cast<std::size_t>(c.num_modality * row), 0.0f);
    const auto blocks = static_cast<std::int64_t>(t.block_first.size()) - 1;
    if (g.p.out.count == 0 || blocks == 0) return dscale;
    HalideBuffer<4> xb(storage_type(g.p.x.dtype)), dyb(storage_type(g.p.out.dtype)), dxb(storage_type(g.dx.dtype));
    HalideBuffer<3> scale(halide_type_t(halide_type_float, 32)), partials(halide_type_t(halide_type_float, 32));
    const halide_type_t int32(halide_type_int, 32);
    HalideBuffer<1> modality(int32), order(int32), block_first(int32);
    set_views(g, g.p.layout.extent[3], xb, dyb, dxb);
    scale.set_dim(0, c.dim, 1);
    scale.set_dim(1, g.p.layout.extent[1], c.num_patterns > 1 ? c.dim : 0);
    scale.set_dim(2, c.num_modality, row);
    modality.set_dim(0, static_cast<std::int64_t>(t.modality.size()), 1);
    order.set_dim(0, static_cast<std::int64_t>(t.order.size()), 1);
    block_first.set_dim(0, blocks + 1, 1);
    std::vector<float> sums(static_cast<std::size_t>(blocks * row));
    set_partials(g, blocks, partials);

    Staging staging(kernel.backend, g.p.memory, &call);
    staging.input(xb.buffer, x);
    staging.input(dyb.buffer, dy);
    staging.output(dxb.buffer, dx);
    if (g.p.memory == Memory::device) {
        staging.input(scale.buffer, norm.device_scales.get(norm.scale, g.p.backend, g.p.gpu_context, g.p.gpu_stream).scale);
    } else {
        staging.host_input(scale.buffer, norm.scale.data());
    }
    staging.host_input(modality.buffer, t.modality.data());
    staging.host_input(order.buffer, t.order.data());
    staging.host_input(block_first.buffer, t.block_first.data());
    staging.host_output(partials.buffer, sums.data());
    InverseRms inv;
    set_inverse_rms(g, 0, g.p.layout.extent[3], inv);
    if (inv.given) {
        staging.input(inv.buffer.buffer, inv.buffer.buffer.host);
    } else {
        staging.host_input(inv.buffer.buffer, &inv.unused);
    }

    void *user_context = &call;
    std::int32_t k = static_cast<std::int32_t>(g.heads_per_dx_row), hp = static_cast<std::int32_t>(g.heads_per_pattern);
    std::int32_t block = static_cast<std::int32_t>(g.block_tokens);
    float eps = c.eps;
    void *args[] = {&user_context, &xb.buffer, &dyb.buffer, &inv.buffer.buffer, &scale.buffer, &modality.buffer, &order.buffer,
                    &block_first.buffer, &k, &hp, &block, &eps, &inv.given, &partials.buffer, &dxb.buffer};
    int status = kernel.fn(args);
    if (status == 0) status = staging.finish(dxb.buffer);
    if (status == 0) status = staging.finish(partials.buffer);
    throw_if_failed(status, kernel);
    std::vector<double> sum(static_cast<std::size_t>(row));
    for (std::size_t m = 0; m + 1 < t.modality_blocks.size(); ++m) {
        const std::int64_t first = t.modality_blocks[m], count = t.modality_blocks[m + 1] - first;
        if (count > 0) add_partials(sums.data() + first * row, count, row, sum.data(), dscale.data() + m * row);
    }
    return dscale;
}

// Each modality's token count, in order: by sizes as given; all tokens in modality 0 otherwise
// (one modality, whose ids are all 0).
std::vector<std::int64_t> segment_sizes(const Geometry &g, const Grouping &grouping) {
    if (grouping.kind() == Grouping::Kind::sizes) return grouping.group_sizes();
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(g.p.norm->config.num_modality), 0);
    sizes[0] = g.p.layout.extent[3];
    return sizes;
}

// The elements of checked view `v` at `data`, contiguous at `to`.
void copy_view(const CheckedView &v, const void *data, void *to) {
    CheckedView source = v;
    source.data = data;
    copy_elements(source, to, contiguous_dims(v.shape));
}

// The partials' storage. Each calling thread keeps its own, sized to its largest call, so later
// calls neither map nor zero fresh pages (mHC at T = 32768: 50 MB, 12,000 page faults a call
// when allocated per call). A call that starts on a thread whose storage is in use (a host loop
// that runs other work on the waiting thread) allocates its own.
class PartialsStorage {
public:
    PartialsStorage() : shared_(!thread_storage().in_use) {
        if (shared_) thread_storage().in_use = true;
    }
    ~PartialsStorage() {
        if (shared_) thread_storage().in_use = false;
    }
    PartialsStorage(const PartialsStorage &) = delete;
    PartialsStorage &operator=(const PartialsStorage &) = delete;

    // Room for n floats, not initialized by this call (the kernel writes every partial).
    float *reserve(std::size_t n) {
        std::vector<float> &values = shared_ ? thread_storage().values : own_;
        if (values.size() < n) std::vector<float>(n).swap(values);
        return values.data();
    }

private:
    struct Storage {
        std::vector<float> values;
        bool in_use = false;
    };
    static Storage &thread_storage() {
        thread_local Storage storage;
        return storage;
    }
    bool shared_;
    std::vector<float> own_;
};

// dscale[m][p][d]: each modality's partials added block by block, in FP64, rounded once.
std::vector<float> run_kernels(const Geometry &g, const KernelEntry &kernel, CallContext &call, const void *x, const void *dy,
                               void *dx, const std::vector<std::int64_t> &sizes) {
    const NormConfig &c = g.p.norm->config;
    const std::int64_t row = g.patterns * c.dim;
    std::vector<float> dscale(static_cast<std::size_t>(c.num_modality * row), 0.0f);
    PartialsStorage storage;
    std::vector<double> sum(static_cast<std::size_t>(row));
    std::int64_t first = 0;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        Segment s;
        s.first = first;
        s.count = sizes[m];
        first += sizes[m];
        if (s.count == 0 || g.p.out.count == 0) continue;
        s.blocks = (s.count + g.block_tokens - 1) / g.block_tokens;
        s.partials = storage.reserve(static_cast<std::size_t>(s.blocks * row));
        s.scale = g.p.norm->scale.data() + static_cast<std::int64_t>(m) * row;
        run_segment(g, kernel, call, x, dy, dx, s);
        add_partials(s.partials, s.blocks, row, sum.data(), dscale.data() + m * row);
    }
    return dscale;
}

float decode_value(DType dtype, const unsigned char *p) {
    if (dtype == DType::f32) {
        float v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    std::uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

void encode_value(DType dtype, float v, unsigned char *p) {
    if (dtype == DType::f32) {
        std::memcpy(p, &v, sizeof v);
        return;
    }
    const std::uint16_t bits = dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
    std::memcpy(p, &bits, sizeof bits);
}

// dweight's elements, contiguous in `packed`: cast(dscale), or cast(float32(old) + dscale) from
// the old values `packed` holds.
void pack_dweight(DType dtype, const std::vector<float> &dscale, bool accumulate, std::vector<unsigned char> &packed) {
    const std::size_t elem = dtype_size(dtype);
    for (std::size_t i = 0; i < dscale.size(); ++i) {
        const float old = accumulate ? decode_value(dtype, packed.data() + i * elem) : 0.0f;
        encode_value(dtype, accumulate ? old + dscale[i] : dscale[i], packed.data() + i * elem);
    }
}

// dweight = cast(dscale), or cast(float32(dweight) + dscale), in dweight's dtype and layout: in
// host memory, or in device memory (contiguous, check_device_views) through the host.
void write_dweight(const Geometry &g, CallContext &call, const std::vector<float> &dscale, void *dweight, bool accumulate) {
    std::vector<unsigned char> packed(dscale.size() * dtype_size(g.dweight.dtype));
    if (g.p.memory == Memory::device) {
        if (accumulate) copy_to_host(g.p.backend, &call, dweight, packed.data(), packed.size());
        pack_dweight(g.dweight.dtype, dscale, accumulate, packed);
        copy_to_device(g.p.backend, &call, packed.data(), dweight, packed.size());
        return;
    }
    const Dims dense = contiguous_dims(g.dweight.shape);
    CheckedView view = g.dweight;
    view.data = dweight;
    if (accumulate) copy_elements(view, packed.data(), dense);
    pack_dweight(g.dweight.dtype, dscale, accumulate, packed);
    view.data = packed.data();
    view.strides = dense;
    copy_elements(view, dweight, g.dweight.strides);
}

}  // namespace

void add_partials(const float *partials, std::int64_t blocks, std::int64_t row, double *sum, float *dscale) {
    std::fill(sum, sum + row, 0.0);
    for (std::int64_t b = 0; b < blocks; ++b) {
        const float *block = partials + b * row;
        for (std::int64_t i = 0; i < row; ++i) sum[i] += static_cast<double>(block[i]);
    }
    for (std::int64_t i = 0; i < row; ++i) dscale[i] = static_cast<float>(sum[i]);
}

std::int64_t partial_block_tokens(std::int64_t rows) {
    return std::max<std::int64_t>(1, abi::kPartialTerms / std::max<std::int64_t>(1, rows));
}

namespace {

// The variants a call takes (a tuning record's class variants where one serves its size: D and
// the bytes of x, dy and dx): `kernel` for the dtypes and the dx rows' kind, and on CPUs the
// streaming-store one choose_cpu_backward may take instead (null where the build has none).
struct BackwardVariants {
    const KernelEntry *kernel = nullptr;
    const KernelEntry *streaming = nullptr;
};
BackwardVariants backward_variants(const Geometry &g, int capability) {
    const auto bytes = [](const CheckedView &v) { return v.count * static_cast<std::int64_t>(dtype_size(v.dtype)); };
    const CallSize size{g.p.norm->config.dim, bytes(g.p.x) + bytes(g.p.out) + bytes(g.dx)};
    BackwardVariants v;
    v.kernel = &find_backward(g.p.backend, capability, g.p.x.dtype, g.p.out.dtype, g.dx.dtype, g.heads_per_dx_row > 1, size);
    v.streaming = find_kernel(g.p.backend, g.p.x.dtype, g.p.out.dtype, Form::backward_single, true, 0, size, g.dx.dtype);
    return v;
}

// The variant a call of `g` with its dx at `dx` runs: a GPU's kernel, or on CPUs
// choose_cpu_backward's pick between the ordinary and the streaming-store one.
const KernelEntry &chosen_variant(const Geometry &g, const BackwardVariants &v, const void *dx) {
    if (g.p.backend != Backend::cpu) return *v.kernel;
    KernelLayout dx_layout = g.p.layout;
    dx_layout.out_stride = g.dx_stride;
    return choose_cpu_backward(*v.kernel, v.streaming, dx_layout, g.dx.dtype, g.dx.count, g.heads_per_dx_row, dx);
}

}  // namespace

const KernelEntry &backward_kernel(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy,
                                   const Grouping &grouping, const TensorView &dx, const TensorView &dweight,
                                   const BackwardOptions &options) {
    const Geometry g = plan_backward(norm, x, dy, grouping, dx, dweight, options);
    const int capability = g.p.backend == Backend::cuda ? cuda_compute_capability(g.p.gpu_context) : 0;
    return chosen_variant(g, backward_variants(g, capability), dx.data);
}

void run_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                  const TensorView &dx, const TensorView &dweight, const BackwardOptions &options) {
    run_backward(norm, x, dy, grouping, dx, dweight, options, nullptr);
}

void run_backward(const NormState &norm, const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping,
                  const TensorView &dx, const TensorView &dweight, const BackwardOptions &options, const KernelEntry *instead) {
    install_halide_hooks();
    Geometry g = plan_backward(norm, x, dy, grouping, dx, dweight, options);
    check_pointers(g, x.data, dy.data, dx.data, dweight.data, grouping.token_ids());
    const int capability = g.p.backend == Backend::cuda ? cuda_compute_capability(g.p.gpu_context) : 0;
    const BackwardVariants variants = backward_variants(g, capability);
    CallContext call{g.p.gpu_context, g.p.gpu_stream};
    const bool gpu = g.p.backend != Backend::cpu;
    if (!gpu) resolve_parallel_loop(call, g.p.parallel_loop, g.p.num_threads);

    // GPUs take the ids as a table, read on the host (device ids copied there and checked).
    const std::int32_t *ids = grouping.token_ids();
    std::vector<std::int32_t> host_ids;
    if (gpu && g.p.takes_ids && g.p.memory == Memory::device && g.p.tokens > 0) {
        host_ids.resize(static_cast<std::size_t>(g.p.tokens));
        copy_to_host(g.p.backend, &call, ids, host_ids.data(), host_ids.size() * sizeof(std::int32_t));
        check_id_values(host_ids.data(), g.p.tokens, norm.config.num_modality);
        ids = host_ids.data();
    }
    const auto run = [&](const Geometry &geometry, const void *xs, const void *dys, void *dxs, const std::vector<std::int64_t> &sizes) {
        const KernelEntry &chosen = instead ? *instead : chosen_variant(geometry, variants, dxs);
        std::vector<float> sums = gpu ? run_gpu(geometry, chosen, call, xs, dys, dxs, gpu_tables(geometry, sizes, geometry.p.takes_ids ? ids : nullptr))
                                      : run_kernels(geometry, chosen, call, xs, dys, dxs, sizes);
        set_last_variant(chosen.name);
        return sums;
    };

    std::vector<float> dscale;
    // The kernels read dense rows; a GPU's staging copies host views of strides >= 0 only
    // (device views are dense and used in place: check_device_views).
    const bool dense = (g.p.layout.extent[0] == 1 ||
                        (g.p.layout.x_stride[0] == 1 && g.p.layout.out_stride[0] == 1 && g.dx_stride[0] == 1)) &&
                       (g.p.memory == Memory::device || !gpu ||
                        (!has_negative_stride(g.p.x) && !has_negative_stride(g.p.out) && !has_negative_stride(g.dx) &&
                         !(g.inverse_rms && has_negative_stride(*g.inverse_rms))));
    // CPUs run a call by ids on tokens permuted into modality order.
    const bool permuted = !gpu && g.p.takes_ids;
    if (g.p.out.count > 0 && (permuted || !dense)) {
        // Through contiguous copies of x and dy, dx copied back: by ids permuted into modality
        // order (the dispatcher's stable order), so each modality's blocks hold the same tokens,
        // in the same order, as the call by sizes on dispatched tensors; other views in their
        // own order.
        const auto dense_copy = [](const CheckedView &v, std::vector<unsigned char> &memory) {
            memory.resize(static_cast<std::size_t>(v.count) * dtype_size(v.dtype));
            return TensorView(memory.data(), v.dtype, v.shape.to_vector());
        };
        std::vector<unsigned char> x_memory, dy_memory, dx_memory, inv_memory;
        const TensorView x_copy = dense_copy(g.p.x, x_memory), dy_copy = dense_copy(g.p.out, dy_memory);
        const TensorView dx_copy = dense_copy(g.dx, dx_memory);
        BackwardOptions copy_options = options;
        if (g.inverse_rms) copy_options.inverse_rms = dense_copy(*g.inverse_rms, inv_memory);
        std::optional<ModalityDispatcher> dispatcher;
        if (permuted) {
            dispatcher.emplace(ids, g.p.tokens, norm.config.num_modality);
            dispatcher->dispatch(x, x_copy);
            dispatcher->dispatch(dy, dy_copy);
            if (g.inverse_rms) dispatcher->dispatch(*options.inverse_rms, TensorView(inv_memory.data(), DType::f32, g.inverse_rms->shape.to_vector()));
        } else {
            copy_view(g.p.x, x.data, x_copy.data);
            copy_view(g.p.out, dy.data, dy_copy.data);
            if (g.inverse_rms) copy_view(*g.inverse_rms, g.inverse_rms_data, inv_memory.data());
        }
        const std::vector<std::int64_t> sizes = dispatcher ? dispatcher->group_sizes() : segment_sizes(g, grouping);
        const Geometry copies = plan_backward(norm, x_copy, dy_copy, dispatcher ? Grouping::sizes(sizes) : grouping, dx_copy,
                                              dweight, copy_options);
        dscale = run(copies, x_copy.data, dy_copy.data, dx_copy.data, sizes);
        if (dispatcher) {
            dispatcher->undispatch(dx_copy, dx);
        } else {
            CheckedView result = g.dx;
            result.data = dx_copy.data;
            result.strides = contiguous_dims(g.dx.shape);
            copy_elements(result, dx.data, g.dx.strides);
        }
    } else {
        dscale = run(g, x.data, dy.data, dx.data, segment_sizes(g, grouping));
    }
    write_dweight(g, call, dscale, dweight.data, options.accumulate_dweight);
}

}  // namespace magi2norm::detail
