/* magi2norm's C ABI: the same runtime as magi2norm.hpp, for C, Rust, Python ctypes and other
 * hosts. C89/C99 compatible.
 *
 *   magi2norm_norm *norm = NULL;
 *   if (magi2norm_norm_create(3072, 1e-6f, 1, 1, MAGI2NORM_DTYPE_UNSET,
 *                             weight, MAGI2NORM_BF16, 3072, &norm) != MAGI2NORM_OK)
 *       fprintf(stderr, "%s\n", magi2norm_last_error());
 *
 * Every function that can fail returns a status; magi2norm_last_error() then says why. The library
 * is C++ and static: link it with a C++ toolchain (CMake does this for magi2norm::magi2norm) or add
 * the C++ standard library (-lstdc++ -lm) to the link. */
#ifndef MAGI2NORM_C_API_H
#define MAGI2NORM_C_API_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MAGI2NORM_OK, then one status per magi2norm::ErrorCode in its order, then internal (an
 * unexpected failure, e.g. out of memory). */
typedef enum magi2norm_status {
    MAGI2NORM_OK = 0,
    MAGI2NORM_ERROR_SHAPE,
    MAGI2NORM_ERROR_DTYPE,
    MAGI2NORM_ERROR_STRIDE,
    MAGI2NORM_ERROR_GROUPING,
    MAGI2NORM_ERROR_WEIGHT,
    MAGI2NORM_ERROR_MODALITY_ID,
    MAGI2NORM_ERROR_NULL_DATA,
    MAGI2NORM_ERROR_OVERLAP,
    MAGI2NORM_ERROR_OVERFLOW,
    MAGI2NORM_ERROR_CONFIG,
    MAGI2NORM_ERROR_FORMAT,
    MAGI2NORM_ERROR_IO,
    MAGI2NORM_ERROR_DEVICE,
    MAGI2NORM_ERROR_INTERNAL,
    /* As MAGI2NORM_DTYPE_RANGE_: magi2norm_status_name of any int32 is defined ("unknown"). */
    MAGI2NORM_STATUS_RANGE_ = 0x7fffffff
} magi2norm_status;

/* "ok", "shape", ... "internal"; "unknown" for a value outside the enum. */
const char *magi2norm_status_name(magi2norm_status status);
/* The message of the last call on this thread that failed, "" when it succeeded. Valid until the
 * next call into the library on this thread. */
const char *magi2norm_last_error(void);

typedef enum magi2norm_dtype {
    MAGI2NORM_DTYPE_UNSET = -1, /* for an output dtype: same as the input / no override */
    MAGI2NORM_F32 = 0,
    MAGI2NORM_BF16 = 1,
    MAGI2NORM_F16 = 2,
    /* Makes every int32 a valid value of the type, so that a caller's out-of-range value is
     * refused with MAGI2NORM_ERROR_DTYPE instead of being undefined behaviour in C++. */
    MAGI2NORM_DTYPE_RANGE_ = 0x7fffffff
} magi2norm_dtype;

typedef enum magi2norm_memory {
    MAGI2NORM_MEMORY_HOST = 0,
    MAGI2NORM_MEMORY_DEVICE = 1, /* cuda backend: a CUdeviceptr; opencl backend: a cl_mem (the view
                                    starts at the buffer's first byte) */
    MAGI2NORM_MEMORY_RANGE_ = 0x7fffffff /* as MAGI2NORM_DTYPE_RANGE_ */
} magi2norm_memory;

/* A strided tensor: `strides` in elements (NULL: contiguous row-major), `rank` entries each. An
 * input's data is only read. */
typedef struct magi2norm_tensor {
    void *data;
    magi2norm_dtype dtype;
    int rank;
    const int64_t *shape;
    const int64_t *strides;
    magi2norm_memory memory;
} magi2norm_tensor;

typedef enum magi2norm_grouping_kind {
    MAGI2NORM_GROUPING_NONE = 0,  /* num_modality == 1 only */
    MAGI2NORM_GROUPING_SIZES = 1, /* tokens ordered by modality, `count` group sizes */
    MAGI2NORM_GROUPING_IDS = 2,   /* one modality id per token, `count` tokens, any order */
    MAGI2NORM_GROUPING_RANGE_ = 0x7fffffff /* as MAGI2NORM_DTYPE_RANGE_ */
} magi2norm_grouping_kind;

typedef struct magi2norm_grouping {
    magi2norm_grouping_kind kind;
    const int64_t *sizes;     /* MAGI2NORM_GROUPING_SIZES */
    const int32_t *ids;       /* MAGI2NORM_GROUPING_IDS; borrowed for the call */
    int64_t count;
    magi2norm_memory ids_memory;
} magi2norm_grouping;

typedef enum magi2norm_backend {
    MAGI2NORM_BACKEND_DEFAULT = -1,
    MAGI2NORM_BACKEND_CPU = 0,
    MAGI2NORM_BACKEND_OPENCL = 1,
    MAGI2NORM_BACKEND_CUDA = 2,
    MAGI2NORM_BACKEND_RANGE_ = 0x7fffffff /* as MAGI2NORM_DTYPE_RANGE_ */
} magi2norm_backend;

/* Where a call runs; CUDA: `context` a CUcontext (NULL: the thread's current one) and `stream` a
 * CUstream (NULL: the legacy default stream); OpenCL: `context` a cl_context (NULL: the queue's)
 * and `stream` the cl_command_queue, which calls on cl_mem views need. */
typedef struct magi2norm_stream {
    magi2norm_backend backend;
    void *context;
    void *stream;
} magi2norm_stream;

typedef struct magi2norm_norm magi2norm_norm;

/* A norm of `dim` (D), `eps`, `num_modality` (M), `num_patterns` (P) and `out_dtype` (UNSET: the
 * input's). `weight` holds `weight_count` == M*P*D contiguous values of `weight_dtype`,
 * modality-major; it is read once. weight == NULL with weight_count == 0 means all zeros (scale 1).
 * On success *norm receives the handle; free it with magi2norm_norm_destroy. */
magi2norm_status magi2norm_norm_create(int64_t dim, float eps, int64_t num_modality, int64_t num_patterns,
                                       magi2norm_dtype out_dtype, const void *weight, magi2norm_dtype weight_dtype,
                                       int64_t weight_count, magi2norm_norm **norm);
/* NULL is ignored. */
void magi2norm_norm_destroy(magi2norm_norm *norm);

/* The output shape for an input shape: writes *out_rank and, when it is <= capacity, the extents. */
magi2norm_status magi2norm_norm_output_shape(const magi2norm_norm *norm, int rank, const int64_t *shape,
                                             int64_t *out_shape, int capacity, int *out_rank);

/* out = norm(x). `grouping` NULL means none; `out_dtype` UNSET means no override; `stream` NULL
 * means the default backend. Nothing is written when the call is refused. */
magi2norm_status magi2norm_norm_forward(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                        const magi2norm_grouping *grouping, const magi2norm_tensor *out,
                                        magi2norm_dtype out_dtype, const magi2norm_stream *stream);
/* The same on DLPack tensors (see dlpack.hpp): CUDA tensors run on the cuda backend unless
 * `stream` names another. */
magi2norm_status magi2norm_norm_forward_dlpack(const magi2norm_norm *norm, const DLTensor *x,
                                               const magi2norm_grouping *grouping, const DLTensor *out,
                                               magi2norm_dtype out_dtype, const magi2norm_stream *stream);

/* The gradients of forward(x) for the output's gradient dy (magi2norm::RMSNorm::backward): dx in
 * `dx_dtype` (UNSET: x's), which may be dy itself; dweight (M*P*D elements, any dtype) receives
 * the weight gradient, or adds it when `accumulate_dweight` is nonzero. `grouping` NULL means
 * none; `stream` NULL means the default backend (the backward runs on the CPU). Nothing is
 * written when the call is refused. */
magi2norm_status magi2norm_norm_backward(const magi2norm_norm *norm, const magi2norm_tensor *x, const magi2norm_tensor *dy,
                                         const magi2norm_grouping *grouping, const magi2norm_tensor *dx,
                                         const magi2norm_tensor *dweight, magi2norm_dtype dx_dtype, int accumulate_dweight,
                                         const magi2norm_stream *stream);

/* Training (magi2norm::CallOptions::inverse_rms, magi2norm::BackwardOptions::inverse_rms): the
 * forward that also writes each output row's inverse RMS (f32, the output's shape without its last
 * axis, in the output's memory), and the backward that takes it in place of the rows' sums of
 * squares, with the same results bit for bit. Otherwise as magi2norm_norm_forward and
 * magi2norm_norm_backward. */
magi2norm_status magi2norm_norm_forward_training(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                                 const magi2norm_grouping *grouping, const magi2norm_tensor *out,
                                                 const magi2norm_tensor *inverse_rms, magi2norm_dtype out_dtype,
                                                 const magi2norm_stream *stream);
magi2norm_status magi2norm_norm_backward_saved(const magi2norm_norm *norm, const magi2norm_tensor *x, const magi2norm_tensor *dy,
                                               const magi2norm_tensor *inverse_rms, const magi2norm_grouping *grouping,
                                               const magi2norm_tensor *dx, const magi2norm_tensor *dweight,
                                               magi2norm_dtype dx_dtype, int accumulate_dweight, const magi2norm_stream *stream);

/* The mHC logits (magi2norm::RMSNorm::mhc_logits): logits [T, N] f32 = float32(norm(x)) @ phi,
 * x [T, D] or [T, S, C], phi [D, N] f32; `inverse_rms` ([T] f32) may be NULL. CPU and host memory;
 * the norm needs num_patterns 1. Nothing is written when the call is refused. */
magi2norm_status magi2norm_norm_mhc_logits(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                           const magi2norm_grouping *grouping, const magi2norm_tensor *phi,
                                           const magi2norm_tensor *logits, const magi2norm_tensor *inverse_rms);
/* Its gradients (magi2norm::RMSNorm::mhc_logits_backward) for dlogits [T, N] f32, from the
 * forward's `inverse_rms` ([T] f32, required): dx (x's shape, `dx_dtype`, UNSET: x's), dweight
 * (added to when `accumulate_dweight` is nonzero) and dphi ([D, N] f32). */
magi2norm_status magi2norm_norm_mhc_logits_backward(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                                    const magi2norm_grouping *grouping, const magi2norm_tensor *phi,
                                                    const magi2norm_tensor *dlogits, const magi2norm_tensor *inverse_rms,
                                                    const magi2norm_tensor *dx, const magi2norm_tensor *dweight,
                                                    const magi2norm_tensor *dphi, magi2norm_dtype dx_dtype, int accumulate_dweight);

/* A call's geometry checked once (magi2norm::Plan): shapes, strides, dtypes, grouping, backend
 * and stream. The views' data pointers (and a grouping's ids) are not read and may be NULL.
 * magi2norm_plan_run then checks only the pointers it is given, and runs. A plan keeps the
 * norm's weight of the time it was made and may outlive the norm; free it with
 * magi2norm_plan_destroy. */
typedef struct magi2norm_plan magi2norm_plan;
magi2norm_status magi2norm_plan_create(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                       const magi2norm_grouping *grouping, const magi2norm_tensor *out,
                                       magi2norm_dtype out_dtype, const magi2norm_stream *stream, magi2norm_plan **plan);
/* `ids` (one per token) for a plan grouped by ids, else NULL. Nothing is written when the run is
 * refused. */
magi2norm_status magi2norm_plan_run(const magi2norm_plan *plan, const void *x, void *out, const int32_t *ids);
/* NULL is ignored. */
void magi2norm_plan_destroy(magi2norm_plan *plan);

/* The AOT variant this thread's last completed kernel ran, e.g. "magi2_norm_cpu_bf16_bf16"; ""
 * before the first (magi2norm::last_variant). */
const char *magi2norm_last_variant(void);

/* Threads of CPU calls (n <= 0: every core, or HL_NUM_THREADS). */
void magi2norm_set_num_threads(int n);
int magi2norm_num_threads(void);
/* The host's parallel loop in place of the library's pool (NULL restores it): it must run
 * task(task_context, i) for every i in [0, count) and return once all have returned. */
typedef void (*magi2norm_parallel_for)(void *context, int count, void (*task)(void *task_context, int index),
                                       void *task_context);
void magi2norm_set_parallel_for(magi2norm_parallel_for parallel_for, void *context);

#ifdef __cplusplus
}
#endif

#endif /* MAGI2NORM_C_API_H */
