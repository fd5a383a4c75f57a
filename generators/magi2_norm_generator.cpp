// The MAGI-2 multi-modality RMSNorm (../shared/SPEC.md), written once as a Halide algorithm.
//
//   xf       = float32(x[d, h, a, t])
//   inv      = 1 / sqrt(float32(sum_d(xf^2)) / D + eps)     (squares in FP32, partial sums of a
//                                                            few in FP32, accumulated in FP64
//                                                            per lane, the lanes added as a tree)
//   y32      = (xf * inv) * scale[d, h, modality(t)]
//   out      = cast(y32, out_type)
//
// The runtime maps every input rank and broadcasting form onto the four axes (d, h, a, t):
// broadcast axes arrive with stride 0, the pattern axis h indexes the scale rows (stride 0 when
// P = 1), and modality(t) comes from per-token ids or from group boundaries without touching x.
// `scale` holds float32(W(w + 1)) per (d, p, m), prepared by the runtime when a weight is set.
//
// Two forms of the same formula: over elements (any dtype pair, any strides), and over paired
// words for dense BF16 -> BF16 rows (`paired_words`, define_paired_words), which spare the CPU
// the widening and packing of each element; both give the same bits.
//
// Schedules live in schedules/, apart from this file; the generator only picks one.
#include "Halide.h"

#include <functional>
#include <vector>

#include "cpu_schedule.h"
#include "cuda_rounding.h"
#include "gpu_schedule.h"
#include "kernel_abi.h"
#include "norm_pieces.h"
#include "norm_stages.h"

namespace magi2norm::algorithm {

using namespace Halide;

// Fixed by the algorithm, not by a schedule's vector width, so every ISA and path of a target
// family adds the same squares together (see generate()).
using abi::kSumLanes;
using abi::kMaxGroups;

class Magi2Norm : public Generator<Magi2Norm> {
public:
    GeneratorParam<Storage> in_type{"in_type", Storage::F32, kStorageNames};
    GeneratorParam<Storage> out_type{"out_type", Storage::F32, kStorageNames};

    // Squares per FP32 partial sum of the sum of squares; 0 = the target's default (4 on CPUs,
    // 1 on GPUs: their schedule reduces single squares in FP64). Changes results within the
    // contract, not only speed, so it is an algorithm parameter.
    GeneratorParam<int> sum_steps{"sum_steps", 0};
    // The paired-word form of BF16 -> BF16 (define_paired_words): x and out are uint32 words of
    // two elements; the runtime sends it contiguous rows of a multiple of 16 elements.
    GeneratorParam<bool> paired_words{"paired_words", false};
    // The one-row form of the element form: x and out are one dense row (every outer extent 1)
    // and scale is the row's modality's [D, 1, 1] block, picked by the runtime, so a call of
    // one row (a decode step's) unpacks no strides, grouping or modality.
    GeneratorParam<bool> one_row{"one_row", false};
    // The training form of the element form: a second output, each row's inverse RMS (FP32, the
    // `inv` the normalization multiplies by, bit for bit), which the backward may take instead
    // of summing the row's squares again.
    GeneratorParam<bool> writes_inverse_rms{"writes_inverse_rms", false};
    // BF16 outputs by the native conversion of AVX-512 BF16 machines (f32_to_bf16_native), which
    // cmake/ir_steps.py --native-bf16 puts in: for an x86 target with avx512_zen4, the element
    // form, compiled through that step.
    GeneratorParam<bool> native_bf16{"native_bf16", false};
    // The schedules' knobs (schedules/knobs.def): cpu_vector_width, ..., gpu_unroll.
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning) GeneratorParam<int> cpu_##name{"cpu_" #name, value};
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning) GeneratorParam<int> gpu_##name{"gpu_" #name, value};
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning)
#include "knobs.def"
    // > 0: the variant for calls that come from memory, written with streaming stores, for
    // outputs aligned to this many bytes (see require_streaming_layout).
    GeneratorParam<int> cpu_streaming_alignment{"cpu_streaming_alignment", 0};
    // The tokens and row length the autoschedulers plan for (set_estimates). Their schedules
    // split the token and row axes by factors that fit these sizes and are only valid for calls
    // at least as large, so the benchmark's peers come in one library per size class.
    GeneratorParam<int> estimate_tokens{"estimate_tokens", 4096};
    GeneratorParam<int> estimate_dim{"estimate_dim", 3072};
    GeneratorParam<int> estimate_rows{"estimate_rows", 1};  // rows a token: the Q/K norm's heads

    // The buffers' element type: the storage type, or uint32 words of two in the paired form.
    Type buffer_type(Storage storage) const { return paired_words ? UInt(32) : element_type(storage); }

    void configure() {
        x = add_input<Buffer<>>("x", buffer_type(in_type), 4);
        scale = add_input<Buffer<float>>("scale", 3);
        token_modality = add_input<Buffer<int32_t>>("token_modality", 1);
        for (int m = 1; m < kMaxGroups; ++m) group_starts.push_back(add_input<int32_t>("group_start_" + std::to_string(m)));
        eps = add_input<float>("eps");
        out = add_output<Buffer<>>("out", buffer_type(out_type), 4);
        if (writes_inverse_rms) inverse_rms_out = add_output<Buffer<float>>("inverse_rms", 3);
    }

    // Every CUDA kernel rounds each operation where the CPU does (cuda_rounding.h).
    void schedule() { round_each_cuda_operation(get_pipeline(), get_target()); }

    void generate() {
        if (native_bf16 && (out_type != Storage::BF16 || paired_words || one_row || writes_inverse_rms ||
                            !get_target().has_feature(Target::AVX512_Zen4))) {
            throw CompileError("native_bf16 is the element form to BF16 on an avx512_zen4 target");
        }
        schedules::NormStages s;
        Var t = s.t;
        Expr num_modality = scale->dim(2).extent();
        // sum_d xf^2, each square in FP32 as the formula has it. The squares are grouped by
        // position, not by a schedule's vector width or thread count: lane l of block b adds the
        // squares at b * block + l, + kSumLanes, + 2 kSumLanes, ... (`sum_steps` of them, 4) in
        // FP32, left to right; each lane accumulates its partials in FP64, block by block, and the
        // 16 lanes are added as a tree (lane_tree), rounded to FP32 once. The same on every
        // target: a CPU vectorizes over the lanes, a GPU gives each lane a thread.
        // Error bound: k squares in FP32 round k - 1 times, each within half an ulp of the
        // partial, so they err by at most (k - 1) x 2^-24 of their sum (1.8e-7 for k = 4), and
        // the FP64 sum adds half an FP32 ulp, for any D. (An FP32 running sum over D = 12288
        // drifts past the contract's 1e-6.) Four squares per partial spare the CPU three of
        // every four FP32 -> FP64 conversions and FP64 adds.
        if (sum_steps < 0) throw CompileError("sum_steps must be 0 (the default, 4) or a count of squares");
        s.sum_steps = sum_steps > 0 ? int(sum_steps) : abi::kSumSteps;
        s.sum_squares = Func("sum_squares");

        // Modality of token t (modality_of): from its per-token id and the group starts.
        std::vector<Expr> starts;
        for (auto *start : group_starts) starts.push_back(*start);
        s.modality = Func("modality");
        s.modality(t) = one_row ? Expr(0) : modality_of((*token_modality)(t), starts, t, num_modality);

        s.output = Func("norm");
        if (paired_words) {
            if (one_row) throw CompileError("one_row is a form of the element form");
            define_paired_words(s);
        } else {
            define_elements(s);
        }
        *out = s.output;  // NOLINT: Output<Buffer> assignment from a Func
        if (writes_inverse_rms) {
            if (paired_words || one_row) throw CompileError("writes_inverse_rms is a form of the element form");
            s.inverse_rms = Func("inverse_rms");
            s.inverse_rms(s.h, s.a, s.t) = s.inv_rms(s.h, s.a, s.t);
            *inverse_rms_out = s.inverse_rms;  // NOLINT: Output<Buffer> assignment from a Func
        }
        set_layout();

        s.input = *x;
        s.x_inner_stride = x->dim(0).stride();
        s.out_inner_stride = out->dim(0).stride();
        s.in_bytes = element_type(in_type).bytes();
        s.one_row = one_row;
        s.out_bytes = element_type(out_type).bytes();
        if (cpu_streaming_alignment > 0) require_streaming_layout(cpu_streaming_alignment);

        set_estimates();
        if (using_autoscheduler()) return;
        if (get_target().has_gpu_feature()) {
            if (paired_words) throw CompileError("paired_words is a CPU form");
            schedules::schedule_gpu(s, gpu_knobs(), get_target());
        } else {
            schedules::schedule_cpu(s, cpu_knobs(), cpu_streaming_alignment > 0, get_target());
        }
    }

private:
    GeneratorInput<Buffer<>> *x = nullptr;
    GeneratorInput<Buffer<float>> *scale = nullptr;
    GeneratorInput<Buffer<int32_t>> *token_modality = nullptr;
    std::vector<GeneratorInput<int32_t> *> group_starts;  // cu[1 .. kMaxGroups - 1]
    GeneratorInput<float> *eps = nullptr;
    GeneratorOutput<Buffer<>> *out = nullptr;
    GeneratorOutput<Buffer<float>> *inverse_rms_out = nullptr;  // (h, a, t), the training form's

    schedules::CpuKnobs cpu_knobs() const {
        schedules::CpuKnobs k;
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning) k.name = cpu_##name;
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning)
#include "knobs.def"
        return k;
    }

    schedules::GpuKnobs gpu_knobs() const {
        schedules::GpuKnobs k;
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning) k.name = gpu_##name;
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning)
#include "knobs.def"
        return k;
    }

    // inv = 1 / sqrt(float32(sum) / D + eps), per row.
    void define_inverse_rms(schedules::NormStages &s, const Expr &dim) {
        s.dim = dim;
        s.inv_rms = Func("inv_rms");
        s.inv_rms(s.h, s.a, s.t) = inverse_rms(s.sum_squares(s.h, s.a, s.t), dim, *eps);
    }

    // The formula over elements: any dtype pair, any strides.
    void define_elements(schedules::NormStages &s) {
        Var d = s.d, h = s.h, a = s.a, t = s.t;
        Expr dim = x->dim(0).extent();
        Func xf("xf");
        xf(d, h, a, t) = decode(in_type, (*x)(d, h, a, t), get_target());

        Func square("square");
        square(d, h, a, t) = xf(d, h, a, t) * xf(d, h, a, t);
        RowSum sum = row_sum(square, dim, s.sum_steps, s.lane, "sum_squares");
        s.blocks = sum.blocks;
        s.lane_sums = sum.lane_sums;
        s.sum_squares = sum.sum;
        define_inverse_rms(s, dim);

        Func y32("y32");
        y32(d, h, a, t) = normalized(xf(d, h, a, t), s.inv_rms(h, a, t), (*scale)(d, h, s.modality(t)));
        s.output(d, h, a, t) = encode(out_type, y32(d, h, a, t), result_nans(in_type, get_target()), get_target(), native_bf16);
    }

    // The same formula over paired words, for BF16 -> BF16 rows of a multiple of 16 elements
    // with unit inner strides: word w of a row holds the elements at 2w (low half) and 2w + 1.
    // Positions are named (ji, odd, jo) = 16 jo + 2 ji + odd, so word 8 jo + ji holds (ji, 0, jo)
    // and (ji, 1, jo): eight words decode into the even and the odd elements of 16 positions
    // with one shift or one mask each, and the encoded odd halves are or-ed into place, where
    // the element form widens, packs and permutes. The sum adds the same squares in the same order as the
    // element form (lane 2 ji + odd, block by block, then the same tree over the lanes), so both
    // forms give the same bits. `scale` holds each row permuted within 16 positions (element
    // 16 jo + 8 odd + ji is the scale of position 16 jo + 2 ji + odd), so each parity's scales
    // are one dense vector.
    void define_paired_words(schedules::NormStages &s) {
        if (in_type != Storage::BF16 || out_type != Storage::BF16) {
            throw CompileError("paired_words is the BF16 -> BF16 form");
        }
        constexpr int kLanePairs = kSumLanes / 2;
        static_assert(kLanePairs == schedules::NormStages::kWordsPerVector);
        s.paired_words = true;
        Var d = s.d, h = s.h, a = s.a, t = s.t;
        Var ji("ji"), odd("odd"), jo("jo");
        Expr words = x->dim(0).extent();
        Expr dim = 2 * words;
        // 0 whenever an element is computed (a negative extent computes none), unknown to the
        // compiler: keeps the codec's vector constants in registers (codec_const).
        Expr zero = cast<uint32_t>(words) >> 31;
        Func xf("xf");
        xf(ji, odd, jo, h, a, t) = bf16_pair_to_f32((*x)(kLanePairs * jo + ji, h, a, t), odd, zero);

        Func square("square");
        square(ji, odd, jo, h, a, t) = xf(ji, odd, jo, h, a, t) * xf(ji, odd, jo, h, a, t);
        // Zero squares past the row, as in the element form (bounds jo only).
        Func padded = BoundaryConditions::constant_exterior(square, 0.0f, {Range(), Range(), {0, dim / kSumLanes}});
        s.blocks = RDom(0, (dim + kSumLanes * s.sum_steps - 1) / (kSumLanes * s.sum_steps), "blocks");
        Expr first = s.blocks * s.sum_steps;
        Expr partial = partial_sum(s.sum_steps, [&](int k) { return padded(ji, odd, first + k, h, a, t); });
        // Lane 2 ji + odd of the element form: the same partials and the same tree.
        s.lane = ji;
        s.odd = odd;
        s.lane_sums = Func("lane_sums");
        s.lane_sums(ji, odd, h, a, t) = cast<double>(0);
        s.lane_sums(ji, odd, h, a, t) += partial;
        s.sum_squares(h, a, t) = lane_tree([&](int l) { return s.lane_sums(l / 2, l % 2, h, a, t); });
        define_inverse_rms(s, dim);

        Func y32("y32");
        Expr scale_of = (*scale)(kSumLanes * jo + kLanePairs * odd + ji, h, s.modality(t));
        y32(ji, odd, jo, h, a, t) = normalized(xf(ji, odd, jo, h, a, t), s.inv_rms(h, a, t), scale_of);
        Func encoded("encoded");
        encoded(ji, odd, jo, h, a, t) = f32_to_bf16_high(y32(ji, odd, jo, h, a, t), result_nans(in_type, get_target()), zero);
        s.output(d, h, a, t) = bf16_pair(encoded(d % kLanePairs, 0, d / kLanePairs, h, a, t),
                                         encoded(d % kLanePairs, 1, d / kLanePairs, h, a, t));
    }

    // The buffers' layouts: any strides for the element form (stride 0 carries broadcasting, a
    // non-unit inner stride is a strided view); dense rows of whole vectors for the paired form,
    // starting at word 0 (as the runtime's buffers do), so d % 8 of a vector is its lanes and
    // its scale loads are dense (with an unknown min they are gathers).
    // Set on the output after it is bound to its Func.
    void set_layout() {
        token_modality->dim(0).set_stride(Expr());
        scale->dim(1).set_stride(Expr());
        if (one_row) {
            Expr dim = x->dim(0).extent();
            const auto dense_row = [](auto *b) {
                b->dim(0).set_min(0).set_stride(1);
                for (int i = 1; i < 4; ++i) b->dim(i).set_min(0).set_extent(1);
            };
            dense_row(x);
            dense_row(out);
            out->dim(0).set_extent(dim);
            scale->dim(0).set_min(0);
            for (int i = 1; i < 3; ++i) scale->dim(i).set_min(0).set_extent(1);
            return;
        }
        if (!paired_words) {
            x->dim(0).set_stride(Expr());
            out->dim(0).set_stride(Expr());
            // The inverse RMS: the output's rows (its bounds), at any strides.
            if (inverse_rms_out) {
                for (int i = 0; i < 3; ++i) inverse_rms_out->dim(i).set_bounds(out->dim(i + 1).min(), out->dim(i + 1).extent());
                inverse_rms_out->dim(0).set_stride(Expr());
            }
            return;
        }
        Expr words = x->dim(0).extent();
        x->dim(0).set_min(0).set_stride(1);
        out->dim(0).set_min(0).set_stride(1).set_extent(words);
        scale->dim(0).set_min(0);
        add_requirement(words % schedules::NormStages::kWordsPerVector == 0,
                        "paired-word variant: rows must be a multiple of 16 elements");
    }

    // Streaming stores (cmake/ir_steps.py marks the output's vector stores non-temporal after
    // Halide's code generation) need aligned addresses: x86's movntdq faults on any other. The
    // schedule writes whole vectors at multiples of the vector width from d = 0, so every vector
    // store is aligned to `bytes` (or to its own size, if smaller) when the output's first
    // element is, its rows are dense and a multiple of `bytes` long, and every other stride is a
    // multiple of `bytes`. The runtime sends only such calls here; any other call fails the
    // pipeline's own checks with an error, never a fault.
    void require_streaming_layout(int bytes) {
        out->set_host_alignment(bytes);
        out->dim(0).set_stride(1);
        const auto bytes_of = [&](Expr elements) { return cast<int64_t>(elements) * buffer_type(out_type).bytes(); };
        Expr aligned = bytes_of(out->dim(0).extent()) % bytes == 0;
        for (int i = 1; i < 4; ++i) {
            aligned = aligned && (out->dim(i).extent() == 1 || bytes_of(out->dim(i).stride()) % bytes == 0);
        }
        add_requirement(aligned, "streaming-store variant: output rows and strides must be multiples of", bytes, "bytes");
    }

    // `estimate_tokens` tokens of `estimate_rows` rows of `estimate_dim` (the model's pre-norm:
    // one row of 3072, SPEC.md), 3 modalities: the size the autoschedulers plan for.
    void set_estimates() {
        const int tokens = estimate_tokens, dim = estimate_dim, rows = estimate_rows, modalities = 3;
        const int row = paired_words ? dim / 2 : dim;
        x->set_estimates({{0, row}, {0, rows}, {0, 1}, {0, tokens}});
        scale->set_estimates({{0, dim}, {0, rows}, {0, modalities}});
        token_modality->set_estimates({{0, tokens}});
        for (int m = 1; m < kMaxGroups; ++m) {
            group_starts[m - 1]->set_estimate(m < modalities ? m * tokens / modalities : tokens);
        }
        eps->set_estimate(1e-6f);
        out->set_estimates({{0, row}, {0, rows}, {0, 1}, {0, tokens}});
        if (inverse_rms_out) inverse_rms_out->set_estimates({{0, rows}, {0, 1}, {0, tokens}});
    }
};

}  // namespace magi2norm::algorithm

HALIDE_REGISTER_GENERATOR(magi2norm::algorithm::Magi2Norm, magi2_norm)
