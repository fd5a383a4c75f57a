// The backward of the MAGI-2 multi-modality RMSNorm (../shared/SPEC.md, "Backward"), per row:
//
//   inv      = the forward's inverse RMS, from the same row sum (norm_pieces.h), bit for bit
//   n        = xf * inv
//   g        = float32(dy) * scale[d, h]
//   dx32     = inv * (g - n * mean_d(g * n))      (the row sum of g * n as the forward's sum)
//   dx       = cast(dx32, dx_type), or the sum of the K output rows of one input row first
//              (singleton-head broadcasting: x [T, 1, D] under a [P, D] scale)
//   partials(d, p, b) = sum over the rows of pattern p in block b of float64(float32(dy) * n)
//
// On CPUs one modality per call: the runtime calls it per modality's tokens with that
// modality's [P, D] scale (a call by ids runs on tokens permuted into modality order). On GPUs
// one call for every modality, in place on device memory (a cl_mem cannot be offset to a
// modality's first token): each token's modality, the tokens in modality order and each block's
// first position in that order are tables the runtime makes, and the scale is [D, P, M]. Either
// way a block holds up to `block_tokens` consecutive tokens of one modality in modality order,
// and the runtime adds each modality's partials over its blocks in block order, so the weight
// gradient does not depend on the grouping form or the thread count.
#include "Halide.h"

#include "backward_stages.h"
#include "cpu_backward_schedule.h"
#include "gpu_backward_schedule.h"
#include "norm_pieces.h"

namespace magi2norm::algorithm {

using namespace Halide;

// Products in one FP32 partial of the weight gradient on CPUs: (64 - 1) 2^-24 = 3.8e-6 of the
// magnitudes' sum at most, within B2's 1e-5 with the other errors (docs/backward.md).
constexpr int kGroupTerms = 64;
// Elements of dy in one tile of tokens on CPUs (and at most in one group): a tile's x, dy and dx
// rows stay in a core's L2 cache from its row sums to its dx (docs/backward.md, Schedule).
constexpr int kTileElements = 1 << 16;

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

    void configure() {
        const bool gpu = get_target().has_gpu_feature();
        x = add_input<Buffer<>>("x", element_type(in_type), 4);
        dy = add_input<Buffer<>>("dy", element_type(dy_type), 4);
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
        // On GPUs the partials first: Halide launches the outputs' kernels in this order, so an
        // in-place dx over dy overwrites dy after the partials have read it.
        if (gpu) partials = add_output<Buffer<double>>("partials", 3);
        dx = add_output<Buffer<>>("dx", element_type(dx_type), 4);
        if (!gpu) partials = add_output<Buffer<double>>("partials", 3);
    }

    void generate() {
        const Target target = get_target();
        const bool gpu = target.has_gpu_feature();  // the GPU form's inputs (configure)
        if (sum_steps < 0) throw CompileError("sum_steps must be 0 (the target's default) or a count of terms");
        const int steps = sum_steps > 0 ? int(sum_steps) : (gpu ? 1 : 4);
        schedules::BackwardStages s;
        Var d = s.d, h = s.h, a = s.a, t = s.t;
        Expr dim = x->dim(0).extent();

        Func xf("xf"), dyf("dyf");
        xf(d, h, a, t) = decode(in_type, (*x)(d, h, a, t), target);
        dyf(d, h, a, t) = decode(dy_type, (*dy)(d, h, a, t), target);

        Func square("square"), g("g"), gx("gx");
        square(d, h, a, t) = xf(d, h, a, t) * xf(d, h, a, t);
        Expr num_modality = gpu ? scale->dim(2).extent() : Expr(1);
        Expr row_scale = gpu ? (*scale)(d, h, clamp((*token_modality)(t), 0, num_modality - 1)) : (*scale)(d, h);
        g(d, h, a, t) = dyf(d, h, a, t) * row_scale;
        gx(d, h, a, t) = g(d, h, a, t) * xf(d, h, a, t);
        // sum_d g * n = inv * sum_d g * x: the second sum needs no inverse RMS, so it is taken in
        // the same pass as the sum of squares (a Tuple on CPUs; the GPUs' are their own kernels).
        Expr sum_squares, sum_gx;
        if (gpu) {
            RowSum squares = gpu_row_sum(square, dim, steps, "sum_squares");
            RowSum gxs = gpu_row_sum(gx, dim, steps, "sum_gx");
            s.sum_squares = squares.sum;
            s.sum_squares_blocks = squares.blocks;
            s.sum_gx = gxs.sum;
            s.sum_gx_blocks = gxs.blocks;
            sum_squares = s.sum_squares(h, a, t);
            sum_gx = s.sum_gx(h, a, t);
        } else {
            RowSum sums = cpu_row_sums({square, gx}, dim, steps, s.lane, "row_sums");
            s.sum_squares = sums.sum;
            s.sum_squares_lanes = sums.lane_sums;
            sum_squares = s.sum_squares(h, a, t)[0];
            sum_gx = s.sum_squares(h, a, t)[1];
        }
        s.inv_rms = Func("inv_rms");
        s.inv_rms(h, a, t) = inverse_rms(sum_squares, dim, *eps);
        Func n("n");
        n(d, h, a, t) = xf(d, h, a, t) * s.inv_rms(h, a, t);
        s.mean_gn = Func("mean_gn");
        s.mean_gn(h, a, t) = cast<float>(sum_gx * cast<double>(s.inv_rms(h, a, t))) / cast<float>(dim);

        Func row_dx("row_dx");
        row_dx(d, h, a, t) = s.inv_rms(h, a, t) * (g(d, h, a, t) - n(d, h, a, t) * s.mean_gn(h, a, t));
        // Singleton-head broadcasting: dx row h is the sum of output rows h K .. h K + K - 1, in
        // that order, in FP32 (autograd's sum over the broadcast axis).
        Expr k = *heads_per_dx_row;
        RDom more(1, k - 1, "more_rows");
        s.dx_summed = Func("dx_summed");
        s.dx_summed(d, h, a, t) = row_dx(d, h * k, a, t);
        if (sums_rows) s.dx_summed(d, h, a, t) += row_dx(d, h * k + more, a, t);
        // NaNs of BF16 operands and of the x86 arithmetic have a clear low half (float_codecs.h).
        const NanBits nans = in_type == Storage::BF16 && dy_type == Storage::BF16 && !gpu ? NanBits::low_half_clear : NanBits::any;
        s.dx = Func("dx");

        // The weight gradient's partial sums (heads_per_pattern: H with one scale row for H heads,
        // the Q/K norm; 1 with P rows): pattern p of block b adds, token by token, middle
        // row by middle row, head by head, the FP32 products dy * n, in FP64 (GPUs: each product
        // widened; CPUs: the FP32 sums of groups of tokens, each widened).
        Expr tokens = dy->dim(3).extent();
        Expr middles = dy->dim(2).extent();
        s.block_tokens = *block_tokens;
        Func product("product");
        product(d, h, a, t) = dyf(d, h, a, t) * n(d, h, a, t);
        s.partials = Func("partials");
        s.partials(d, h, s.blk) = cast<double>(0);
        if (gpu) {
            s.dx(d, h, a, t) = encode(dx_type, s.dx_summed(d, h, a, t), nans, target);
            // Block b's tokens: the tokens at positions [first(b), first(b + 1)) of the modality
            // order. Clamped too: bounds inference does not see the where clause.
            s.partial_terms = RDom(0, *heads_per_pattern, 0, middles, 0, s.block_tokens, "partial_terms");
            Expr position = (*block_first)(s.blk) + s.partial_terms.z;
            s.partial_terms.where(position < (*block_first)(s.blk + 1));
            Expr token = clamp((*token_order)(clamp(position, 0, tokens - 1)), 0, tokens - 1);
            s.partials(d, h, s.blk) += cast<double>(product(d, h * *heads_per_pattern + s.partial_terms.x, s.partial_terms.y, token));
        } else {
            // A block's tokens run in tiles of F tokens, a tile in groups of G: G the tokens whose
            // products number at most kGroupTerms and whose dy rows hold at most kTileElements
            // (at least one token), F the most groups within kTileElements (at least one). An
            // FP32 sum of n terms errs by at most (n - 1) 2^-24 of the sum of their magnitudes
            // (docs/backward.md, B2).
            Expr rows = *heads_per_pattern * middles;  // products a token adds to one partial
            Expr token_elements = dim * dy->dim(1).extent() * middles;
            Expr group = max(1, min(kGroupTerms / rows, kTileElements / token_elements));
            Expr tile_groups = max(1, kTileElements / (token_elements * group));
            Expr tile = group * tile_groups;
            Expr tiles = (s.block_tokens + tile - 1) / tile;
            Expr blocks = (tokens + s.block_tokens - 1) / s.block_tokens;
            // Token `in_tile` of tile `tl` of block `blk`, clamped into the block and the call
            // (bounds inference does not see the where clauses that skip the clamped ones).
            auto token_at = [&](Expr in_tile, Expr tl, Expr blk) {
                return min(blk * s.block_tokens + min(tl * tile + in_tile, s.block_tokens - 1), tokens - 1);
            };
            auto in_call = [&](Expr in_tile, Expr tl, Expr blk) {
                Expr in_block = tl * tile + in_tile;
                return in_block < s.block_tokens && blk * s.block_tokens + in_block < tokens;
            };
            s.partial_terms = RDom(0, *heads_per_pattern, 0, middles, 0, group, "partial_terms");
            Expr in_tile = s.grp * group + s.partial_terms.z;
            s.partial_terms.where(in_call(in_tile, s.tile, s.blk));
            s.group_sum = Func("group_sum");
            s.group_sum(d, h, s.grp, s.tile, s.blk) = 0.0f;
            s.group_sum(d, h, s.grp, s.tile, s.blk) +=
                product(d, h * *heads_per_pattern + s.partial_terms.x, s.partial_terms.y, token_at(in_tile, s.tile, s.blk));
            // A task is a block, its tiles one after another, each tile's partials then its dx
            // rows (the schedule fuses them). Halide fuses loops of matching names and kinds, so
            // both stages are updates over domains named alike, (group or token of the tile,
            // tile, block), and both index their block through an expression, not the bare
            // variable (b b / max(b, 1) is b).
            s.partial_groups = RDom(0, tile_groups, 0, tiles, 0, blocks, "tiles");
            s.partial_groups.where(in_call(s.partial_groups.x * group, s.partial_groups.y, s.partial_groups.z));
            Expr b = s.partial_groups.z;
            s.partials(d, h, min(b * b / max(b, 1), blocks - 1)) +=
                cast<double>(s.group_sum(d, h, s.partial_groups.x, s.partial_groups.y, b));
            s.dx_tokens = RDom(0, tile, 0, tiles, 0, blocks, "tiles");
            s.dx_tokens.where(in_call(s.dx_tokens.x, s.dx_tokens.y, s.dx_tokens.z));
            Expr token = token_at(s.dx_tokens.x, s.dx_tokens.y, s.dx_tokens.z);
            s.dx(d, h, a, t) = undef(element_type(dx_type));
            s.dx(d, h, a, token) = encode(dx_type, s.dx_summed(d, h, a, token), nans, target);
        }
        *dx = s.dx;  // NOLINT: Output<Buffer> assignment from a Func
        *partials = s.partials;  // NOLINT: Output<Buffer> assignment from a Func

        // Dense rows (the runtime copies other views): fused stages cannot be specialized on
        // strides, and unknown strides vectorize as gathers.
        for (auto *b : {x, dy}) b->dim(0).set_stride(1);
        dx->dim(0).set_stride(1);
        scale->dim(1).set_stride(Expr());
        if (gpu) {
            for (auto *table : {token_modality, token_order, block_first}) table->dim(0).set_stride(1);
        }
        s.heads_per_dx_row = k;
        s.dim = dim;
        s.dx_bytes = element_type(dx_type).bytes();
        if (gpu) {
            schedules::schedule_gpu_backward(s, target);
        } else {
            schedules::schedule_cpu_backward(s, target);
        }
    }

private:
    GeneratorInput<Buffer<>> *x = nullptr, *dy = nullptr;
    GeneratorInput<Buffer<float>> *scale = nullptr;
    GeneratorInput<Buffer<int32_t>> *token_modality = nullptr, *token_order = nullptr, *block_first = nullptr;  // GPUs
    GeneratorInput<int32_t> *heads_per_dx_row = nullptr, *heads_per_pattern = nullptr, *block_tokens = nullptr;
    GeneratorInput<float> *eps = nullptr;
    GeneratorOutput<Buffer<>> *dx = nullptr;
    GeneratorOutput<Buffer<double>> *partials = nullptr;
};

}  // namespace magi2norm::algorithm

HALIDE_REGISTER_GENERATOR(magi2norm::algorithm::Magi2NormBackward, magi2_norm_backward)
