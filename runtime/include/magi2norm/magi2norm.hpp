// magi2norm: the MAGI-2 multi-modality RMSNorm (see SPEC.md), ahead-of-time compiled by Halide.
//
//   magi2norm::RMSNorm norm({/*dim=*/3072, /*eps=*/1e-6f, /*num_modality=*/3}, weight_view);
//   norm.forward(x_view, magi2norm::Grouping::sizes({n_video, n_audio, n_text}), out_view);
//
// Views carry a data pointer, a dtype, a shape and strides in elements; nothing is copied or
// permuted. Every bad argument throws magi2norm::Error, naming the problem, before anything
// is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace magi2norm {

// ---------------------------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------------------------
enum class DType : std::uint8_t { f32, bf16, f16 };

// "f32", "bf16" or "f16".
const char *dtype_name(DType dtype);
// Accepts f32/float32/float/F32, bf16/bfloat16/BF16, f16/float16/half/F16; nullopt otherwise.
std::optional<DType> parse_dtype(std::string_view name);
// Bytes per element: 4 or 2.
std::size_t dtype_size(DType dtype);

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------
enum class ErrorCode {
    shape,        // a shape that does not fit the norm (last dim, rank, broadcasting, output shape)
    dtype,        // an unknown dtype, or one that differs from what the call needs
    stride,       // strides of the wrong length, or an output whose elements would alias
    grouping,     // missing, negative or mis-summed group sizes; grouping where none is possible
    weight,       // a weight of the wrong size or dtype
    modality_id,  // a per-token modality id outside [0, num_modality)
    null_data,    // a null data pointer for a non-empty tensor
    overlap,      // an element of the input (or an id) shares memory with one of the output
    overflow,     // sizes or offsets that do not fit the index types
    config,       // dim, eps, num_modality or num_patterns out of range
    format,       // a malformed file (safetensors)
    io,           // a file that cannot be read or written
    device,       // a backend that is not compiled in, has no driver or device, or failed
};

const char *error_code_name(ErrorCode code);

class Error : public std::runtime_error {
public:
    Error(ErrorCode code, const std::string &message);
    ErrorCode code() const noexcept { return code_; }

private:
    ErrorCode code_;
};

// ---------------------------------------------------------------------------------------------
// Backends and memory
// ---------------------------------------------------------------------------------------------
// Where a norm runs: the CPU variants (AVX-512 / AVX2 / SSE4.1, picked at run time), or the GPU
// schedule compiled for OpenCL or CUDA.
enum class Backend : std::uint8_t { cpu, opencl, cuda };
const char *backend_name(Backend backend);
// The backends this library was built with.
std::vector<Backend> compiled_backends();
// Whether `backend` can run here now: compiled in, its driver loads, a device answers. When
// not, `why` (if given) receives the reason.
bool backend_available(Backend backend, std::string *why = nullptr);
// The backend of calls that do not name one: MAGI2NORM_BACKEND (cpu, opencl, cuda) from the
// environment at first use, else cpu; set_default_backend changes it for the process.
Backend default_backend();
void set_default_backend(Backend backend);
// The AOT variant that the calling thread's last completed kernel ran, by its function name
// (the symbol profilers show): "magi2_norm_<family>_<in>_<out>", e.g. "magi2_norm_cpu_bf16_bf16",
// "magi2_norm_cpu_stream_bf16_bf16" (streaming stores), "magi2_norm_cpu_paired_bf16_bf16" (BF16
// rows read and written as 32-bit words of two, "cpu_paired_streaming" with streaming stores),
// "magi2_norm_cpu_row_f32_f32" (a call of one dense row), "magi2_norm_cuda86_bf16_f32"; after a
// backward, "magi2_norm_backward_<family>_<x>_<dy>_<dx>", e.g.
// "magi2_norm_backward_cpu_single_bf16_f32_bf16" ("cpu_single_streaming": dx by streaming
// stores; "cpu": dx rows that add several dy rows). Empty
// before the thread's first; a refused or failed call leaves it as it was. Within a CPU variant
// Halide picks the ISA (AVX-512, AVX2 or SSE4.1) at run time.
const char *last_variant();

// Where a view's data lives. Host memory works with every backend (the GPU backends copy it to
// the device and back, synchronously: a convenience, not the fast path). Device memory is used
// in place: for the CUDA backend a CUDA device pointer (CUdeviceptr cast to a pointer), for the
// OpenCL backend a cl_mem (cast to a pointer) whose first byte is the view's element 0, so its
// strides must be >= 0 (make a sub-buffer to start elsewhere). A cl_mem's size is checked: a view
// that reaches past its buffer, or an input and output sharing bytes of one parent buffer, is
// refused. A CUDA pointer's extent cannot be checked: the host vouches for it.
enum class Memory : std::uint8_t { host, device };

// The caller's execution context for a GPU call. CUDA: `context` is a CUcontext and `stream` a
// CUstream, both as void*; null context means the calling thread's current context (what a
// PyTorch host has), null stream the legacy default stream. OpenCL: `stream` is the host's
// cl_command_queue (required with device memory) and `context` its cl_context (null: the
// queue's). The call enqueues its work on that stream or queue and returns without
// synchronizing when every view is in device memory.
struct Stream {
    std::optional<Backend> backend;  // unset: default_backend()
    void *context = nullptr;
    void *stream = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Tensor views
// ---------------------------------------------------------------------------------------------
// A strided view of a tensor. `strides` are in elements, one per axis, and may be 0
// (broadcast) or negative; leave them empty for a contiguous row-major tensor. The stride of
// an axis of extent 1 is never applied, so any value is accepted there. Views have at most 8
// axes (a norm's input and output 1 to 4). An input and an output may lie in one buffer, e.g.
// interleaved, as long as no element of one shares a byte with an element of the other
// (decided exactly; a layout the bounded test cannot decide is refused with Error(overlap), or
// Error(stride) for an output's own elements).
template <typename Pointer>
struct BasicTensorView {
    Pointer data = nullptr;
    DType dtype = DType::f32;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    Memory memory = Memory::host;

    BasicTensorView() = default;
    BasicTensorView(Pointer data_, DType dtype_, std::vector<std::int64_t> shape_,
                    std::vector<std::int64_t> strides_ = {}, Memory memory_ = Memory::host)
        : data(data_), dtype(dtype_), shape(std::move(shape_)), strides(std::move(strides_)), memory(memory_) {}
    // A mutable view converts to a read-only one.
    template <typename Other>
    BasicTensorView(const BasicTensorView<Other> &other)  // NOLINT: implicit on purpose
        : data(other.data), dtype(other.dtype), shape(other.shape), strides(other.strides), memory(other.memory) {}
};

using TensorView = BasicTensorView<void *>;
using ConstTensorView = BasicTensorView<const void *>;

// Row-major strides of `shape`, in elements.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t> &shape);
// Product of `shape` (1 for rank 0); throws Error(overflow) past INT64_MAX.
std::int64_t element_count(const std::vector<std::int64_t> &shape);

// ---------------------------------------------------------------------------------------------
// Modality grouping
// ---------------------------------------------------------------------------------------------
class ModalityDispatcher;

// Which modality each token (index of axis 0) belongs to.
class Grouping {
public:
    enum class Kind { none, sizes, ids };

    // No grouping: only valid with num_modality == 1.
    static Grouping none();
    // Tokens ordered by modality, modality m owning `group_sizes[m]` consecutive tokens.
    static Grouping sizes(std::vector<std::int64_t> group_sizes);
    // One id per token, in any order. The ids are borrowed, not copied: keep them alive
    // for the duration of the call. Ids in device memory (a CUDA pointer or a cl_mem) are not
    // range-checked on the host; the kernel clamps them to [0, num_modality).
    static Grouping ids(const std::int32_t *token_ids, std::int64_t num_tokens, Memory memory = Memory::host);
    // The group sizes of a dispatcher: the input is in its dispatched (modality-sorted) order.
    static Grouping from(const ModalityDispatcher &dispatcher);

    Kind kind() const { return kind_; }
    const std::vector<std::int64_t> &group_sizes() const { return sizes_; }
    const std::int32_t *token_ids() const { return ids_; }
    std::int64_t num_tokens() const { return num_ids_; }
    Memory ids_memory() const { return ids_memory_; }

private:
    Kind kind_ = Kind::none;
    std::vector<std::int64_t> sizes_;
    const std::int32_t *ids_ = nullptr;
    std::int64_t num_ids_ = 0;
    Memory ids_memory_ = Memory::host;
};

// The model's per-step grouping helper: from a 1-D modality mapping it builds the stable
// argsort permutation (tokens sorted by modality, ties in token order), its inverse, the group
// sizes (bincount with minlength num_modality) and the cumulative sizes, and it permutes or
// inverse-permutes any tensor along axis 0.
class ModalityDispatcher {
public:
    ModalityDispatcher(const std::int32_t *modality_mapping, std::int64_t num_tokens, std::int64_t num_modality);

    std::int64_t num_tokens() const { return static_cast<std::int64_t>(permutation_.size()); }
    std::int64_t num_modality() const { return static_cast<std::int64_t>(group_sizes_.size()); }
    // dispatched[i] = original[permutation[i]]
    const std::vector<std::int64_t> &permutation() const { return permutation_; }
    // original[j] = dispatched[inverse_permutation[j]]
    const std::vector<std::int64_t> &inverse_permutation() const { return inverse_; }
    const std::vector<std::int64_t> &group_sizes() const { return group_sizes_; }
    // num_modality + 1 entries, starting at 0.
    const std::vector<std::int64_t> &cumulative_sizes() const { return cumulative_; }

    // out[i, ...] = in[permutation[i], ...]; same dtype and shape, axis 0 of length num_tokens.
    void dispatch(ConstTensorView in, TensorView out) const;
    // out[permutation[i], ...] = in[i, ...]: undoes dispatch.
    void undispatch(ConstTensorView in, TensorView out) const;

private:
    std::vector<std::int64_t> permutation_, inverse_, group_sizes_, cumulative_;
};

// ---------------------------------------------------------------------------------------------
// Process-wide settings, and their per-call form
// ---------------------------------------------------------------------------------------------
// Which CPU outputs are written with streaming (non-temporal) stores. They skip reading each
// output line before writing it (a third of the memory traffic of a bf16 -> bf16 norm), and
// leave the output out of the cache, so they pay for large outputs and cost small ones, which
// their consumer would find in cache. Results are identical either way. Only outputs that can
// be stored aligned take them: the first element aligned to 16 bytes (CMake option
// MAGI2NORM_STREAMING_ALIGNMENT; malloc and std::vector align to 16, PyTorch's CPU allocator to
// 64), rows dense and a multiple of 16 bytes long, the other strides multiples of 16 bytes.
// Other outputs get ordinary stores.
// StreamingPolicy{} is the untuned default; a build tuned for a machine may start from another
// (default_streaming_policy).
struct StreamingPolicy {
    std::int64_t min_output_bytes = 4 << 20;  // smaller outputs stay in cache for their consumer; 0 = never
    int min_element_bytes = 2;                // output dtypes narrower than this take ordinary stores
    std::int64_t min_row_elements = 1;        // as do rows (the normalized axis) shorter than this
};
// The process's policy, for calls that do not set their own; takes effect for calls that start
// afterwards.
void set_streaming_policy(const StreamingPolicy &policy);
StreamingPolicy streaming_policy();
// The policy a process starts with: this build's (min_output_bytes from its tuning record, else
// StreamingPolicy{}), which set_streaming_policy(default_streaming_policy()) restores.
StreamingPolicy default_streaming_policy();

// Threads used by CPU calls on the library's pool (at most 256); n <= 0 restores the default,
// which is every core (or HL_NUM_THREADS when set). Takes effect for calls that start afterwards.
void set_num_threads(int n);
int num_threads();

// A host's parallel loop: runs task(task_context, i) for every i in [0, count), in any order and
// on any threads, and returns once all have returned. Tasks never throw and never wait on each
// other, so running them one after another on the calling thread is also correct.
using ParallelFor = void (*)(void *context, int count, void (*task)(void *task_context, int index),
                             void *task_context);
// A parallel loop and the context handed back to it; a null `run` is the library's pool.
struct ParallelLoop {
    ParallelFor run = nullptr;
    void *context = nullptr;
};
// Runs the parallel loop of CPU calls through `parallel_for` (handed `context` back), e.g. on the
// host's own thread pool, instead of the library's pool; nullptr restores the library's pool.
// A call of one task (a tiny call) runs on the calling thread with no loop.
// set_num_threads does not apply to a host's loop. Takes effect for calls that start afterwards.
void set_parallel_for(ParallelFor parallel_for, void *context = nullptr);

// The settings of one call; an unset field takes the process's setting when the call starts.
// Two components of one host can so call with their own settings without touching each other's.
struct CallOptions {
    std::optional<DType> out_dtype;                // overrides the norm's out_dtype
    Stream stream;                                 // the backend and, for GPUs, context and stream
    std::optional<int> num_threads;                // threads on the library's pool, at most its size
    std::optional<ParallelLoop> parallel_loop;     // a host's loop, or {} for the library's pool
    std::optional<StreamingPolicy> streaming;      // which outputs take streaming stores
    // Training: also write each output row's inverse RMS here (FP32, the output's shape without
    // its last axis, in the output's memory; any strides, >= 0 on GPUs), the `inv` the output was
    // scaled by, bit for bit, which backward() may take in place of the row's sum of squares. A
    // Plan writes it to this view's memory on every run.
    std::optional<TensorView> inverse_rms;
};

// The settings of one backward call (RMSNorm::backward); unset fields as in CallOptions.
struct BackwardOptions {
    std::optional<DType> dx_dtype;              // unset: the input's dtype
    bool accumulate_dweight = false;            // dweight = dweight + gradient, else dweight = gradient
    Stream stream;                              // the backend and, for GPUs, context and stream
    std::optional<int> num_threads;             // threads on the library's pool, at most its size
    std::optional<ParallelLoop> parallel_loop;  // a host's loop, or {} for the library's pool
    // The forward's inverse RMS of each dy row (CallOptions::inverse_rms): used in place of the
    // rows' sums of squares, with the same results bit for bit when it is the forward's.
    std::optional<ConstTensorView> inverse_rms;
};

// The settings of one mHC logits call (RMSNorm::mhc_logits); unset fields as in CallOptions.
struct MhcLogitsOptions {
    std::optional<int> num_threads;             // threads on the library's pool, at most its size
    std::optional<ParallelLoop> parallel_loop;  // a host's loop, or {} for the library's pool
    // Training: also write each token's inverse RMS here (FP32 [T], any strides), the norm
    // forward's bit for bit (CallOptions::inverse_rms), which backward() may take.
    std::optional<TensorView> inverse_rms;
};

// ---------------------------------------------------------------------------------------------
// The norm
// ---------------------------------------------------------------------------------------------
struct NormConfig {
    std::int64_t dim = 0;               // D >= 1, the normalized (last) axis
    float eps = 1e-6f;                  // added to the mean square, in FP32
    std::int64_t num_modality = 1;      // M >= 1
    std::int64_t num_patterns = 1;      // P >= 1
    std::optional<DType> out_dtype;     // unset: same as the input
};

class Plan;
class RMSNorm;
namespace detail {
struct NormState;
struct CallPlan;
// The plan inside a Plan and the state inside a norm, for the library's own tools (the tuner
// runs its candidates on them).
const CallPlan &call_plan_of(const Plan &plan);
const NormState &norm_state_of(const RMSNorm &norm);
}  // namespace detail

// One call's geometry, validated once: shapes, strides, dtypes, grouping, backend and stream,
// with the variant chosen. run() then checks only what can change from call to call (the
// pointers: null, input/output overlap, the ids, and the alignment that picks streaming stores
// and the paired-word form), which makes a small call about as cheap as the kernel itself. A
// plan keeps the weight the norm had when it was made, and runs on the GPU context and stream
// it was made for. Copyable and cheap to copy; run() may be called from many threads at once.
class Plan {
public:
    Plan() = default;
    // out = norm(x) for data laid out as planned. A plan grouped by ids needs them here.
    void run(const void *x, void *out) const;
    void run(const void *x, void *out, const std::int32_t *token_ids) const;

private:
    friend class RMSNorm;
    friend const detail::CallPlan &detail::call_plan_of(const Plan &plan);
    explicit Plan(std::shared_ptr<const detail::CallPlan> call) : call_(std::move(call)) {}
    std::shared_ptr<const detail::CallPlan> call_;
};

class RMSNorm {
public:
    // A fresh norm: all-zero weight, scale 1.
    explicit RMSNorm(const NormConfig &config);
    // `weight`: M*P*D values (any shape with that many elements, any strides), modality-major
    // as in the checkpoint, in f32, bf16 or f16. It is read once; the norm keeps
    // float32(W(w + 1)), the +1 rounded in the weight's own dtype.
    RMSNorm(const NormConfig &config, ConstTensorView weight);

    void set_weight(ConstTensorView weight);
    const NormConfig &config() const { return config_; }
    // float32(W(w + 1)), M*P*D values.
    const std::vector<float> &scale() const;

    // The output shape for an input of shape `input_shape` (SPEC.md's broadcasting).
    std::vector<std::int64_t> output_shape(const std::vector<std::int64_t> &input_shape) const;
    // The output dtype for an input dtype and an optional per-call override.
    DType output_dtype(DType input, std::optional<DType> out_dtype = std::nullopt) const;

    // y = norm(x). `out` must have output_shape(x.shape) and output_dtype(x.dtype, out_dtype).
    // `stream` picks the backend and, for CUDA, the caller's context and stream. The views are
    // taken by reference: a copy would allocate their shapes and strides on every call.
    void forward(const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
                 std::optional<DType> out_dtype = std::nullopt, const Stream &stream = {}) const;
    void forward(const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
                 const CallOptions &options) const;
    // forward() in two steps: everything but the data pointers of x, out and the ids (which
    // plan() does not read; they may be null) is checked here, once.
    Plan plan(const ConstTensorView &x, const Grouping &grouping, const TensorView &out,
              const CallOptions &options = {}) const;

    // The gradients of forward(x, grouping) for the output's gradient dy (SPEC.md, "Backward"):
    // dx (x's shape, options.dx_dtype or x's dtype; it may be dy itself, same dtype size and
    // layout, and shares no other memory) and dweight (M*P*D elements, modality-major as the
    // weight, in any dtype), which receives the weight gradient or, with accumulate_dweight, adds
    // it. dy has output_shape(x.shape) in x's dtype or f32. The weight gradient is the same bits
    // for any thread count, parallel loop and grouping form on one backend. On a GPU backend,
    // device views (dense rows, a contiguous dweight) are used in place and host views staged.
    void backward(const ConstTensorView &x, const ConstTensorView &dy, const Grouping &grouping, const TensorView &dx,
                  const TensorView &dweight, const BackwardOptions &options = {}) const;

    // The mHC logits (SPEC.md, "The mHC logits"): logits = float32(forward(x)) @ phi, the
    // normalized rows never in memory. A member because it is this norm's forward (its D, eps,
    // grouping and scale) with one consumer. x is [T, D] or [T, S, C] with S * C = D, in any
    // dtype and strides; phi is [D, N] FP32, N >= 1; logits [T, N] FP32. The norm needs
    // num_patterns 1. Each logit is a fixed-order FP64 sum of exact products, so the logits are
    // the same bits for any thread count, grouping form, x form and strides. CPU, host memory.
    void mhc_logits(const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi, const TensorView &logits,
                    const MhcLogitsOptions &options = {}) const;
    // Its gradients for dlogits [T, N] FP32 (SPEC.md's L3): dphi [D, N] FP32, the sum over tokens
    // in their order of y32 dlogits in FP64; dx (x's shape) and dweight as backward() gives them for
    // dy = float32(dlogits @ phi^T, summed in FP64). options.inverse_rms must hold the forward's
    // (MhcLogitsOptions::inverse_rms); x's and dx's streams one stride apart. The same bits for any
    // thread count and grouping form. CPU, host memory.
    void mhc_logits_backward(const ConstTensorView &x, const Grouping &grouping, const ConstTensorView &phi,
                             const ConstTensorView &dlogits, const TensorView &dx, const TensorView &dweight, const TensorView &dphi,
                             const BackwardOptions &options) const;

private:
    friend const detail::NormState &detail::norm_state_of(const RMSNorm &norm);
    NormConfig config_;
    std::shared_ptr<const detail::NormState> state_;  // null once moved from
};

}  // namespace magi2norm
