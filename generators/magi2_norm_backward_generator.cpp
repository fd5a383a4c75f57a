// The backward of the MAGI-2 multi-modality RMSNorm (../shared/SPEC.md, "Backward"), per row:
//
//   inv      = the forward's inverse RMS, from the same row sum (norm_pieces.h), bit for bit, or
//              the forward's own where the runtime passes it (`inverse_rms`, given): the same bits
//   n        = xf * inv
//   g        = float32(dy) * scale[d, h]
//   dx32     = inv * (g - n * mean_d(g * n))      (the row sum of g * n as the forward's sum)
//   dx       = cast(dx32, dx_type), or the sum of the K output rows of one input row first
//              (singleton-head broadcasting: x [T, 1, D] under a [P, D] scale)
//   partials(d, p, b) = sum over the rows of pattern p in block b of float32(dy) * n, in FP32,
//              at most abi::kPartialTerms products a block, on every target
//
// On CPUs one modality per call: the runtime calls it per modality's tokens with that
// modality's [P, D] scale (a call by ids runs on tokens permuted into modality order). On GPUs
// one call for every modality, in place on device memory (a cl_mem cannot be offset to a
// modality's first token): each token's modality, the tokens in modality order and each block's
// first position in that order are tables the runtime makes, and the scale is [D, P, M]. Either
// way a block holds up to `block_tokens` consecutive tokens of one modality in modality order
// (the same blocks on every target), and the runtime adds each modality's partials over its
// blocks in block order, so the weight gradient does not depend on the grouping form, the thread
// count or the target.
#include "Halide.h"

#include <limits>

#include "backward_abi.h"
#include "backward_stages.h"
#include "cpu_backward_schedule.h"
#include "cuda_rounding.h"
#include "gpu_backward_schedule.h"
#include "knobs.h"
#include "norm_pieces.h"

namespace magi2norm::algorithm {

using namespace Halide;

class Magi2NormBackward : public Generator<Magi2NormBackward> {
public:
    GeneratorParam<Storage> in_type{"in_type", Storage::F32, kStorageNames};
    GeneratorParam<Storage> dy_type{"dy_type", Storage::F32, kStorageNames};
    GeneratorParam<Storage> dx_type{"dx_type", Storage::F32, kStorageNames};
    // Terms per FP32 partial of the row sums: the forward's (0: 4 on CPUs, 1 on GPUs).
    GeneratorParam<int> sum_steps{"sum_steps", 0};
    // Whether a dx row may add several dy rows (heads_per_dx_row > 1: singleton-head
    // broadcasting). A variant without it takes heads_per_dx_row = 1 only (the runtime's choice)
    // and leaves the sum's loop out of dx's vector loop.
    GeneratorParam<bool> sums_rows{"sums_rows", true};
    // > 0 (CPUs, one dy row a dx row): the variant for calls from memory, whose dx is written with
    // streaming stores (cmake/ir_steps.py), for dx aligned to this many bytes.
    GeneratorParam<int> cpu_streaming_alignment{"cpu_streaming_alignment", 0};
    // The CPU tasks' and tiles' sizes (schedules/knobs.def): cpu_backward_tile_elements, ...
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning) GeneratorParam<int> cpu_backward_##name{"cpu_backward_" #name, value};
#include "knobs.def"

    void configure() {
        const bool gpu = get_target().has_gpu_feature();
        x = add_input<Buffer<>>("x", element_type(in_type), 4);
        dy = add_input<Buffer<>>("dy", element_type(dy_type), 4);
        // The forward's inverse RMS of each dy row (h, a, t), read where `inverse_rms_given`;
        // otherwise any readable view (the runtime's: one float at stride 0).
        saved_inverse_rms = add_input<Buffer<float>>("inverse_rms", 3);
        scale = add_input<Buffer<float>>("scale", gpu ? 3 : 2);
        if (gpu) {
            token_modality = add_input<Buffer<int32_t>>("token_modality", 1);
            token_order = add_input<Buffer<int32_t>>("token_order", 1);
            block_first = add_input<Buffer<int32_t>>("block_first", 1);
        }
        heads_per_dx_row = add_input<int32_t>("heads_per_dx_row");
        heads_per_pattern = add_input<int32_t>("heads_per_pattern");
        block_tokens = add_input<int32_t>("block_tokens");
        eps = add_input<float>("eps");
        inverse_rms_given = add_input<bool>("inverse_rms_given");
        // On GPUs the partials first: Halide launches the outputs' kernels in this order, so an
        // in-place dx over dy overwrites dy after the partials have read it.
        // The partials in FP32 (the runtime widens them).
        if (gpu) partials = add_output<Buffer<>>("partials", Float(32), 3);
        dx = add_output<Buffer<>>("dx", element_type(dx_type), 4);
        if (!gpu) partials = add_output<Buffer<>>("partials", Float(32), 3);
    }

    // Every CUDA kernel rounds each operation where the CPU does (cuda_rounding.h).
    void schedule() { round_each_cuda_operation(get_pipeline(), get_target()); }

    void generate() {
        if (sum_steps < 0) throw CompileError("sum_steps must be 0 (the default, 4) or a count of terms");
        schedules::BackwardStages s;
        Terms e = define_terms(s);
        define_row_sums(s, e);
        define_dx_rows(s, e);
        if (get_target().has_gpu_feature()) {
            define_gpu_outputs(s, e);
        } else {
            define_cpu_outputs(s, e);
        }
        *dx = s.dx;  // NOLINT: Output<Buffer> assignment from a Func
        *partials = s.partials;  // NOLINT: Output<Buffer> assignment from a Func
        declare_layouts();
        s.whole_vectors = cpu_streaming_alignment > 0;
        s.heads_per_dx_row = e.k;
        s.dim = e.dim;
        if (get_target().has_gpu_feature()) {
            schedules::schedule_gpu_backward(s, get_target());
        } else {
            schedules::schedule_cpu_backward(s, get_target());
        }
    }

private:
    // What the steps share: the decoded inputs, g = float32(dy) * scale, the row sums' terms,
    // n = xf * inv, the weight gradient's products dy * n, D and K (dy rows a dx row).
    struct Terms {
        Func xf{"xf"}, dyf{"dyf"}, square{"square"}, g{"g"}, gx{"gx"}, n{"n"}, product{"product"};
        Expr dim, k;
    };

    Terms define_terms(schedules::BackwardStages &s) {
        const bool gpu = get_target().has_gpu_feature();  // the GPU form's inputs (configure)
        Var d = s.d, h = s.h, a = s.a, t = s.t;
        Terms e;
        e.dim = x->dim(0).extent();
        e.xf(d, h, a, t) = decode(in_type, (*x)(d, h, a, t), get_target());
        e.dyf(d, h, a, t) = decode(dy_type, (*dy)(d, h, a, t), get_target());
        e.square(d, h, a, t) = e.xf(d, h, a, t) * e.xf(d, h, a, t);
        Expr num_modality = gpu ? scale->dim(2).extent() : Expr(1);
        Expr row_scale = gpu ? (*scale)(d, h, clamp((*token_modality)(t), 0, num_modality - 1)) : (*scale)(d, h);
        e.g(d, h, a, t) = e.dyf(d, h, a, t) * row_scale;
        e.gx(d, h, a, t) = e.g(d, h, a, t) * e.xf(d, h, a, t);
        return e;
    }

    // The row sums, the inverse RMS and mean(g n) of each row.
    void define_row_sums(schedules::BackwardStages &s, const Terms &e) {
        const bool gpu = get_target().has_gpu_feature();
        const int steps = sum_steps > 0 ? int(sum_steps) : abi::kSumSteps;
        Var h = s.h, a = s.a, t = s.t;
        const Expr &dim = e.dim;
        // sum_d g * n = inv * sum_d g * x: the second sum needs no inverse RMS, so it is taken in
        // the same pass as the sum of squares (a Tuple on CPUs; the GPUs' are their own kernels,
        // each sum added as if it were alone, so the same bits). With the forward's inverse RMS
        // given, pass 1 sums g * x alone (the same sum, so the same bits); the sums of squares
        // are then not computed (Halide guards a stage by the select that uses it).
        Expr given = *inverse_rms_given;
        Expr sum_squares, sum_gx;
        RowSum gxs = row_sum(e.gx, dim, steps, s.lane, "sum_gx");
        s.sum_gx = gxs.sum;
        s.sum_gx_lanes = gxs.lane_sums;
        s.sum_gx_blocks = gxs.blocks;
        if (gpu) {
            RowSum squares = row_sum(e.square, dim, steps, s.lane, "sum_squares");
            s.sum_squares = squares.sum;
            s.sum_squares_lanes = squares.lane_sums;
            s.sum_squares_blocks = squares.blocks;
            sum_squares = s.sum_squares(h, a, t);
            sum_gx = s.sum_gx(h, a, t);
        } else {
            RowSum sums = row_sums({e.square, e.gx}, dim, steps, s.lane, "row_sums");
            s.sum_squares = sums.sum;
            s.sum_squares_lanes = sums.lane_sums;
            sum_squares = s.sum_squares(h, a, t)[0];
            sum_gx = select(given, s.sum_gx(h, a, t), s.sum_squares(h, a, t)[1]);
        }
        s.inv_rms = Func("inv_rms");
        s.inv_rms(h, a, t) = select(given, (*saved_inverse_rms)(h, a, t), inverse_rms(sum_squares, dim, *eps));
        // A row whose FP32 mean square overflows has inv = 0, so n = 0 at its finite elements and
        // mean(g n) = 0, or NaN where an element of x or g is not finite (0 x inf). inv sum(g x)
        // cannot tell: sum(g x) overflows too on rows near FP32's largest values, and 0 x inf is
        // NaN. Such a row counts its elements of infinite x or g instead; Halide computes the
        // count only for rows with inv = 0.
        RDom row(0, dim, "row");
        row.where(row < select(s.inv_rms(h, a, t) == 0.0f, dim, 0));
        s.nonfinite_terms = Func("nonfinite_terms");
        s.nonfinite_terms(h, a, t) = 0;
        // Finite: an exponent field not all ones (integer arithmetic: no rounding for a GPU to differ on).
        const Expr exponent = Internal::make_const(UInt(32), 0x7f800000);
        const auto finite = [&](Expr v) { return (reinterpret<uint32_t>(v) & exponent) != exponent; };
        s.nonfinite_terms(h, a, t) += select(finite(e.xf(row, h, a, t)) && finite(e.g(row, h, a, t)), 0, 1);
        Expr overflowed_mean = select(s.nonfinite_terms(h, a, t) > 0, Expr(std::numeric_limits<float>::quiet_NaN()), 0.0f);
        s.mean_gn = Func("mean_gn");
        s.mean_gn(h, a, t) = select(s.inv_rms(h, a, t) == 0.0f, overflowed_mean,
                                    cast<float>(sum_gx * cast<double>(s.inv_rms(h, a, t))) / cast<float>(dim));
    }

    // n and the products dy * n, and each dx row in FP32 before its cast: the sum of its K dy
    // rows' gradients.
    void define_dx_rows(schedules::BackwardStages &s, Terms &e) {
        Var d = s.d, h = s.h, a = s.a, t = s.t;
        e.n(d, h, a, t) = e.xf(d, h, a, t) * s.inv_rms(h, a, t);
        e.product(d, h, a, t) = e.dyf(d, h, a, t) * e.n(d, h, a, t);
        Func row_dx("row_dx");
        row_dx(d, h, a, t) = s.inv_rms(h, a, t) * (e.g(d, h, a, t) - e.n(d, h, a, t) * s.mean_gn(h, a, t));
        // Singleton-head broadcasting: dx row h is the sum of output rows h K .. h K + K - 1, in
        // that order, in FP32 (autograd's sum over the broadcast axis).
        e.k = *heads_per_dx_row;
        RDom more(1, e.k - 1, "more_rows");
        s.dx_summed = Func("dx_summed");
        s.dx_summed(d, h, a, t) = row_dx(d, h * e.k, a, t);
        if (sums_rows) s.dx_summed(d, h, a, t) += row_dx(d, h * e.k + more, a, t);
        s.dx = Func("dx");
        s.block_tokens = *block_tokens;
        s.partials = Func("partials");
    }

    // NaNs of BF16 operands and of the x86 arithmetic have a clear low half (float_codecs.h).
    NanBits dx_nans() const {
        return in_type == Storage::BF16 && dy_type == Storage::BF16 && !get_target().has_gpu_feature() ? NanBits::low_half_clear
                                                                                                      : NanBits::any;
    }

    // The weight gradient's partial sums (heads_per_pattern: H with one scale row for H heads,
    // the Q/K norm; 1 with P rows): pattern p of block b adds, token by token, middle row by
    // middle row, head by head, the FP32 products dy * n in FP32, over a block of at most
    // abi::kPartialTerms products. On GPUs, block b's tokens are the tokens at positions
    // [first(b), first(b + 1)) of the modality order, clamped too (bounds inference does not see
    // the where clause); dx an ordinary output.
    void define_gpu_outputs(schedules::BackwardStages &s, const Terms &e) {
        Var d = s.d, h = s.h, a = s.a, t = s.t;
        Expr tokens = dy->dim(3).extent();
        Expr middles = dy->dim(2).extent();
        s.partials(d, h, s.blk) = 0.0f;
        s.dx(d, h, a, t) = encode(dx_type, s.dx_summed(d, h, a, t), dx_nans(), get_target());
        s.partial_terms = RDom(0, *heads_per_pattern, 0, middles, 0, s.block_tokens, "partial_terms");
        Expr position = (*block_first)(s.blk) + s.partial_terms.z;
        s.partial_terms.where(position < (*block_first)(s.blk + 1));
        Expr token = clamp((*token_order)(clamp(position, 0, tokens - 1)), 0, tokens - 1);
        s.partials(d, h, s.blk) += e.product(d, h * *heads_per_pattern + s.partial_terms.x, s.partial_terms.y, token);
    }

    // On CPUs a block is block_tokens tokens (the runtime's: at most abi::kPartialTerms products
    // a partial, backward_abi.h), its FP32 partial the products added token by token, middle row
    // by middle row, head by head. A task is whole blocks, at least task_tokens tokens and
    // task_elements elements of dy, so that tasks outweigh their dispatch; its tokens run in
    // tiles of as many as fit in tile_elements (at least one), whose x and dy rows stay in a
    // core's L2 cache from their row sums to their partials and dx (docs/backward.md, Schedule).
    void define_cpu_outputs(schedules::BackwardStages &s, const Terms &e) {
        Var d = s.d, h = s.h, a = s.a, t = s.t;
        Expr tokens = dy->dim(3).extent();
        Expr middles = dy->dim(2).extent();
        const schedules::CpuBackwardKnobs knobs = cpu_backward_knobs();
        Expr heads = dy->dim(1).extent();
        Expr token_elements = e.dim * heads * middles;
        Expr task_tokens = max(knobs.task_tokens, (knobs.task_elements + token_elements - 1) / token_elements);
        Expr task = (task_tokens + s.block_tokens - 1) / s.block_tokens * s.block_tokens;
        Expr tile = clamp(knobs.tile_elements / token_elements, 1, task);
        Expr tiles = (task + tile - 1) / tile;
        Expr tasks = (tokens + task - 1) / task;
        Expr blocks = (tokens + s.block_tokens - 1) / s.block_tokens;
        // Both the partials and dx are updates over (head or dx row, middle row, token of the
        // tile, tile, task): Halide fuses loops of matching names and kinds, so the schedule
        // can run both in one pass over a tile's rows. The token is clamped into its task and
        // the call (bounds inference does not see the where clauses that skip the clamped ones).
        auto terms = [&](Expr rows, const char *name) {
            RDom r(0, rows, 0, middles, 0, tile, 0, tiles, 0, tasks, name);
            Expr in_task = r.w * tile + r.z;
            r.where(in_task < task && r[4] * task + in_task < tokens);
            return r;
        };
        auto token_of = [&](const RDom &r) { return min(r[4] * task + min(r.w * tile + r.z, task - 1), tokens - 1); };
        s.partial_terms = terms(heads, "terms");
        s.dx_terms = terms(heads / e.k, "terms");
        Expr token = token_of(s.partial_terms);
        s.partials(d, h, s.blk) = 0.0f;
        s.partials(d, s.partial_terms.x / *heads_per_pattern, min(token / s.block_tokens, blocks - 1)) +=
            e.product(d, s.partial_terms.x, s.partial_terms.y, token);
        // dx indexes its row and middle row through expressions too (r clamped to its own
        // range): a bare reduction variable on the left is a pure one, whose loop Halide
        // does not fuse with the partials' (indexed by head / heads_per_pattern).
        Expr dx_row = min(s.dx_terms.x, heads / e.k - 1), dx_middle = min(s.dx_terms.y, middles - 1);
        Expr dx_token = token_of(s.dx_terms);
        s.dx(d, h, a, t) = undef(element_type(dx_type));
        s.dx(d, dx_row, dx_middle, dx_token) = encode(dx_type, s.dx_summed(d, dx_row, dx_middle, dx_token), dx_nans(), get_target());
    }

    // Dense rows (the runtime copies other views): fused stages cannot be specialized on
    // strides, and unknown strides vectorize as gathers.
    void declare_layouts() {
        for (auto *b : {x, dy}) b->dim(0).set_stride(1);
        dx->dim(0).set_stride(1);
        saved_inverse_rms->dim(0).set_stride(Expr());
        scale->dim(1).set_stride(Expr());
        if (get_target().has_gpu_feature()) {
            for (auto *table : {token_modality, token_order, block_first}) table->dim(0).set_stride(1);
        }
        if (cpu_streaming_alignment > 0) require_streaming_layout(cpu_streaming_alignment);
    }

    schedules::CpuBackwardKnobs cpu_backward_knobs() const {
        schedules::CpuBackwardKnobs k;
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning) k.name = cpu_backward_##name;
#include "knobs.def"
        return k;
    }

    // Streaming stores need aligned addresses (x86's movntdq faults on any other) and whole
    // vectors (cmake/ir_steps.py cannot mark a masked store). Rows of a multiple of
    // abi::kStreamingLanes elements, declared so, leave the vector loops no tail; with dx's first
    // element aligned to `bytes`, its rows a multiple of `bytes` long and its other strides
    // multiples of `bytes`, every vector store of dx is aligned. The runtime sends only such
    // calls here; any other fails the pipeline's own checks with an error, never a fault.
    void require_streaming_layout(int bytes) {
        if (get_target().has_gpu_feature() || sums_rows) throw CompileError("streaming-store variants are CPU variants of one dy row a dx row (sums_rows=false)");
        const auto whole = [](Expr extent) { return extent / abi::kStreamingLanes * abi::kStreamingLanes; };
        for (auto *b : {x, dy}) b->dim(0).set_extent(whole(b->dim(0).extent()));
        dx->dim(0).set_extent(whole(dx->dim(0).extent()));
        partials->dim(0).set_extent(whole(partials->dim(0).extent()));
        dx->set_host_alignment(bytes);
        const auto bytes_of = [&](Expr elements) { return cast<int64_t>(elements) * element_type(dx_type).bytes(); };
        Expr aligned = bytes_of(dx->dim(0).extent()) % bytes == 0;
        for (int i = 1; i < 4; ++i) aligned = aligned && (dx->dim(i).extent() == 1 || bytes_of(dx->dim(i).stride()) % bytes == 0);
        add_requirement(aligned, "streaming-store variant: dx rows and strides must be multiples of", bytes, "bytes");
    }

    GeneratorInput<Buffer<>> *x = nullptr, *dy = nullptr;
    GeneratorInput<Buffer<float>> *saved_inverse_rms = nullptr;
    GeneratorInput<bool> *inverse_rms_given = nullptr;
    GeneratorInput<Buffer<float>> *scale = nullptr;
    GeneratorInput<Buffer<int32_t>> *token_modality = nullptr, *token_order = nullptr, *block_first = nullptr;  // GPUs
    GeneratorInput<int32_t> *heads_per_dx_row = nullptr, *heads_per_pattern = nullptr, *block_tokens = nullptr;
    GeneratorInput<float> *eps = nullptr;
    GeneratorOutput<Buffer<>> *dx = nullptr;
    GeneratorOutput<Buffer<>> *partials = nullptr;
};

}  // namespace magi2norm::algorithm

HALIDE_REGISTER_GENERATOR(magi2norm::algorithm::Magi2NormBackward, magi2_norm_backward)
