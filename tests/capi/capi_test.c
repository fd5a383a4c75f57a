/* The C ABI from C: results against values worked out by hand, error statuses and messages,
 * DLPack tensors, threads and the host parallel-loop hook. Prints each failed check; exits 1 if any. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "magi2norm/c_api.h"

static int failures = 0;

#define CHECK(cond)                                                     \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                 \
        }                                                               \
    } while (0)

/* Exact in FP32 (rows whose mean square is a perfect square, eps 0) or within 1e-6 relative. */
static int close_to(float got, float want) { return fabsf(got - want) <= 1e-6f * (1.0f + fabsf(want)); }

/* D = 4, eps = 0. Row 0 [2, -2, 2, -2]: mean square 4, n = x / 2. Row 1 [0, 0, 3, 4]: mean square
 * 25/4, n = x / 2.5. Weight [0.5, 0, -0.25, 1] gives scale [1.5, 1, 0.75, 2]. */
static const float x_rows[2][4] = {{2, -2, 2, -2}, {0, 0, 3, 4}};
static const float weight[4] = {0.5f, 0.0f, -0.25f, 1.0f};
static const float y_rows[2][4] = {{1.5f, -1.0f, 0.75f, -2.0f}, {0.0f, 0.0f, 0.9f, 3.2f}};
static const float y_rows_unit_scale[2][4] = {{1.0f, -1.0f, 1.0f, -1.0f}, {0.0f, 0.0f, 1.2f, 1.6f}};
static const int64_t shape_2x4[2] = {2, 4};

static magi2norm_tensor tensor(const void *data, magi2norm_dtype dtype, int rank, const int64_t *shape,
                               const int64_t *strides) {
    magi2norm_tensor t;
    t.data = (void *)data;
    t.dtype = dtype;
    t.rank = rank;
    t.shape = shape;
    t.strides = strides;
    t.memory = MAGI2NORM_MEMORY_HOST;
    return t;
}

static int rows_match(const float *got, const float want[2][4]) {
    int r, d, ok = 1;
    for (r = 0; r < 2; ++r)
        for (d = 0; d < 4; ++d) ok &= close_to(got[r * 4 + d], want[r][d]);
    return ok;
}

static void test_forward(void) {
    magi2norm_norm *norm = NULL;
    float y[8];
    uint16_t y_bf16[8];
    const uint16_t want_bf16[4] = {0x3fc0, 0xbf80, 0x3f40, 0xc000}; /* 1.5, -1, 0.75, -2 */
    magi2norm_tensor x = tensor(x_rows, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor out = tensor(y, MAGI2NORM_F32, 2, shape_2x4, NULL);

    CHECK(magi2norm_norm_create(4, 0.0f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 4, &norm) == MAGI2NORM_OK);
    CHECK(norm != NULL);
    CHECK(magi2norm_norm_forward(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
    CHECK(rows_match(y, y_rows));
    CHECK(strcmp(magi2norm_last_error(), "") == 0);

    /* A per-call BF16 output: row 0 is exact, so its bits are known. */
    out = tensor(y_bf16, MAGI2NORM_BF16, 2, shape_2x4, NULL);
    CHECK(magi2norm_norm_forward(norm, &x, NULL, &out, MAGI2NORM_BF16, NULL) == MAGI2NORM_OK);
    CHECK(memcmp(y_bf16, want_bf16, sizeof want_bf16) == 0);
    {
        const char *variant = magi2norm_last_variant();
        const size_t n = strlen(variant);
        CHECK(strncmp(variant, "magi2_norm_", 11) == 0 && n > 9 && strcmp(variant + n - 9, "_f32_bf16") == 0);
    }

    /* The input read column-major through strides: element (r, d) at d * 2 + r. */
    {
        float x_columns[8];
        const int64_t column_strides[2] = {1, 2};
        int r, d;
        for (r = 0; r < 2; ++r)
            for (d = 0; d < 4; ++d) x_columns[d * 2 + r] = x_rows[r][d];
        x = tensor(x_columns, MAGI2NORM_F32, 2, shape_2x4, column_strides);
        out = tensor(y, MAGI2NORM_F32, 2, shape_2x4, NULL);
        memset(y, 0, sizeof y);
        CHECK(magi2norm_norm_forward(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
        CHECK(rows_match(y, y_rows));
    }
    magi2norm_norm_destroy(norm);
}

/* Two modalities: modality 0 has the weight above, modality 1 all zeros (scale 1). */
static magi2norm_norm *two_modality_norm(void) {
    float weights[8] = {0};
    magi2norm_norm *norm = NULL;
    memcpy(weights, weight, sizeof weight);
    CHECK(magi2norm_norm_create(4, 0.0f, 2, 1, MAGI2NORM_DTYPE_UNSET, weights, MAGI2NORM_F32, 8, &norm) == MAGI2NORM_OK);
    return norm;
}

static void test_grouping(void) {
    float y[8];
    const int64_t sizes[2] = {1, 1};
    const int32_t ids[2] = {1, 0};
    magi2norm_norm *norm = two_modality_norm();
    magi2norm_tensor x = tensor(x_rows, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor out = tensor(y, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_grouping grouping;
    memset(&grouping, 0, sizeof grouping);

    grouping.kind = MAGI2NORM_GROUPING_SIZES;
    grouping.sizes = sizes;
    grouping.count = 2;
    CHECK(magi2norm_norm_forward(norm, &x, &grouping, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
    CHECK(close_to(y[0], y_rows[0][0]) && close_to(y[3], y_rows[0][3]));                          /* modality 0 */
    CHECK(close_to(y[6], y_rows_unit_scale[1][2]) && close_to(y[7], y_rows_unit_scale[1][3])); /* modality 1 */

    /* The same tokens by ids, the other way round. */
    grouping.kind = MAGI2NORM_GROUPING_IDS;
    grouping.ids = ids;
    grouping.ids_memory = MAGI2NORM_MEMORY_HOST;
    CHECK(magi2norm_norm_forward(norm, &x, &grouping, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
    CHECK(close_to(y[0], y_rows_unit_scale[0][0]) && close_to(y[3], y_rows_unit_scale[0][3]));
    CHECK(close_to(y[6], y_rows[1][2]) && close_to(y[7], y_rows[1][3]));

    /* M = 2 needs a grouping. */
    CHECK(magi2norm_norm_forward(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_ERROR_GROUPING);
    CHECK(strstr(magi2norm_last_error(), "grouping") != NULL);
    magi2norm_norm_destroy(norm);
}

static void test_output_shape(void) {
    magi2norm_norm *norm = NULL;
    const int64_t x_shape[3] = {5, 1, 4};
    int64_t out_shape[3] = {0, 0, 0};
    int out_rank = 0;
    CHECK(magi2norm_norm_create(4, 1e-6f, 1, 2, MAGI2NORM_DTYPE_UNSET, NULL, MAGI2NORM_F32, 0, &norm) == MAGI2NORM_OK);
    CHECK(magi2norm_norm_output_shape(norm, 3, x_shape, out_shape, 3, &out_rank) == MAGI2NORM_OK);
    CHECK(out_rank == 3 && out_shape[0] == 5 && out_shape[1] == 2 && out_shape[2] == 4); /* singleton heads broadcast */
    CHECK(magi2norm_norm_output_shape(norm, 3, x_shape, NULL, 0, &out_rank) == MAGI2NORM_OK && out_rank == 3);
    magi2norm_norm_destroy(norm);
}

static void test_errors(void) {
    magi2norm_norm *norm = NULL;
    float y[8];
    const int64_t shape_2x3[2] = {2, 3};
    magi2norm_tensor x = tensor(x_rows, MAGI2NORM_F32, 2, shape_2x3, NULL);
    magi2norm_tensor out = tensor(y, MAGI2NORM_F32, 2, shape_2x3, NULL);

    CHECK(magi2norm_norm_create(0, 1e-6f, 1, 1, MAGI2NORM_DTYPE_UNSET, NULL, MAGI2NORM_F32, 0, &norm) == MAGI2NORM_ERROR_CONFIG);
    CHECK(norm == NULL);
    CHECK(strstr(magi2norm_last_error(), "dim") != NULL);
    CHECK(magi2norm_norm_create(4, 1e-6f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 3, &norm) == MAGI2NORM_ERROR_WEIGHT);
    CHECK(magi2norm_norm_create(4, 1e-6f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, (magi2norm_dtype)7, 4, &norm) == MAGI2NORM_ERROR_DTYPE);

    CHECK(magi2norm_norm_create(4, 1e-6f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 4, &norm) == MAGI2NORM_OK);
    memset(y, 0, sizeof y);
    CHECK(magi2norm_norm_forward(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_ERROR_SHAPE);
    CHECK(strncmp(magi2norm_last_error(), "magi2norm: shape: ", 18) == 0);
    CHECK(y[0] == 0.0f); /* a refused call writes nothing */
    CHECK(strcmp(magi2norm_status_name(MAGI2NORM_ERROR_SHAPE), "shape") == 0);
    CHECK(strcmp(magi2norm_status_name(MAGI2NORM_ERROR_INTERNAL), "internal") == 0);
    CHECK(strcmp(magi2norm_status_name((magi2norm_status)99), "unknown") == 0);
    CHECK(magi2norm_norm_forward(NULL, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_ERROR_NULL_DATA);
    CHECK(magi2norm_norm_forward(norm, NULL, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_ERROR_NULL_DATA);
    /* A success clears the message. */
    x.shape = out.shape = shape_2x4;
    CHECK(magi2norm_norm_forward(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
    CHECK(strcmp(magi2norm_last_error(), "") == 0);
    magi2norm_norm_destroy(norm);
    magi2norm_norm_destroy(NULL);
}

static void test_dlpack(void) {
    magi2norm_norm *norm = NULL;
    float y[1 + 8] = {0};
    int64_t shape[2] = {2, 4};
    DLTensor x, out;
    memset(&x, 0, sizeof x);
    x.data = (void *)x_rows;
    x.device.device_type = kDLCPU;
    x.ndim = 2;
    x.dtype.code = kDLFloat;
    x.dtype.bits = 32;
    x.dtype.lanes = 1;
    x.shape = shape;
    out = x;
    out.data = y;
    out.byte_offset = sizeof(float);

    CHECK(magi2norm_norm_create(4, 0.0f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 4, &norm) == MAGI2NORM_OK);
    CHECK(magi2norm_norm_forward_dlpack(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
    CHECK(y[0] == 0.0f && rows_match(y + 1, y_rows));
    out.dtype.lanes = 2;
    CHECK(magi2norm_norm_forward_dlpack(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_ERROR_DTYPE);
    out.dtype.lanes = 1;
    out.device.device_type = kDLOpenCL;
    CHECK(magi2norm_norm_forward_dlpack(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_ERROR_DEVICE);
    magi2norm_norm_destroy(norm);
}

/* A host "pool" that runs every task on the calling thread, counting loops and tasks. */
struct loop_counts {
    int loops, tasks;
};

static void serial_loop(void *context, int count, void (*task)(void *, int), void *task_context) {
    struct loop_counts *counts = (struct loop_counts *)context;
    int i;
    ++counts->loops;
    for (i = 0; i < count; ++i) {
        task(task_context, i);
        ++counts->tasks;
    }
}

/* 16 rows of 1024 equal values (64 KiB of f32: two tasks), which a unit scale maps to 1. */
static float wide_x[16 * 1024], wide_y[16 * 1024];
static const int64_t shape_16x1024[2] = {16, 1024};

static void test_threads(void) {
    struct loop_counts counts = {0, 0};
    magi2norm_norm *norm = NULL, *wide = NULL;
    float y[8];
    int i, ones = 1;
    magi2norm_tensor x = tensor(x_rows, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor out = tensor(y, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor wx = tensor(wide_x, MAGI2NORM_F32, 2, shape_16x1024, NULL);
    magi2norm_tensor wy = tensor(wide_y, MAGI2NORM_F32, 2, shape_16x1024, NULL);

    magi2norm_set_num_threads(2);
    CHECK(magi2norm_num_threads() == 2);
    magi2norm_set_num_threads(0);

    /* The host's loop runs the tasks of a call of two or more; a call of one task runs on the
     * calling thread. */
    CHECK(magi2norm_norm_create(4, 0.0f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 4, &norm) == MAGI2NORM_OK);
    CHECK(magi2norm_norm_create(1024, 0.0f, 1, 1, MAGI2NORM_DTYPE_UNSET, NULL, MAGI2NORM_F32, 0, &wide) == MAGI2NORM_OK);
    for (i = 0; i < 16 * 1024; ++i) wide_x[i] = 3.0f;
    magi2norm_set_parallel_for(serial_loop, &counts);
    memset(y, 0, sizeof y);
    CHECK(magi2norm_norm_forward(norm, &x, NULL, &out, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
    CHECK(magi2norm_norm_forward(wide, &wx, NULL, &wy, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
    magi2norm_set_parallel_for(NULL, NULL);
    CHECK(counts.loops == 1 && counts.tasks >= 1);
    CHECK(rows_match(y, y_rows));
    for (i = 0; i < 16 * 1024; ++i) ones &= close_to(wide_y[i], 1.0f);
    CHECK(ones);
    magi2norm_norm_destroy(norm);
    magi2norm_norm_destroy(wide);
}

/* A plan made from views without data, run on two inputs; grouped by ids, the ids of each run. */
static void test_plan(void) {
    float y[8];
    const float x_swapped[2][4] = {{0, 0, 3, 4}, {2, -2, 2, -2}};
    const int32_t ids[2] = {1, 0}, bad_ids[2] = {0, 2};
    magi2norm_norm *norm = two_modality_norm();
    magi2norm_plan *plan = NULL;
    magi2norm_tensor x = tensor(NULL, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor out = tensor(NULL, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_grouping grouping;
    memset(&grouping, 0, sizeof grouping);

    grouping.kind = MAGI2NORM_GROUPING_IDS;
    grouping.count = 2;
    CHECK(magi2norm_plan_create(norm, &x, &grouping, &out, MAGI2NORM_DTYPE_UNSET, NULL, &plan) == MAGI2NORM_OK);
    magi2norm_norm_destroy(norm); /* the plan keeps what it needs */
    CHECK(magi2norm_plan_run(plan, x_rows, y, ids) == MAGI2NORM_OK);
    CHECK(close_to(y[0], y_rows_unit_scale[0][0]) && close_to(y[3], y_rows_unit_scale[0][3]));
    CHECK(close_to(y[6], y_rows[1][2]) && close_to(y[7], y_rows[1][3]));
    CHECK(magi2norm_plan_run(plan, x_swapped, y, ids) == MAGI2NORM_OK);
    CHECK(close_to(y[2], y_rows_unit_scale[1][2]) && close_to(y[4], y_rows[0][0]));
    CHECK(magi2norm_plan_run(plan, x_rows, y, bad_ids) == MAGI2NORM_ERROR_MODALITY_ID);
    CHECK(strstr(magi2norm_last_error(), "modality id") != NULL);
    CHECK(magi2norm_plan_run(plan, x_rows, NULL, ids) == MAGI2NORM_ERROR_NULL_DATA);
    CHECK(magi2norm_plan_run(NULL, x_rows, y, ids) == MAGI2NORM_ERROR_NULL_DATA);
    magi2norm_plan_destroy(plan);
    magi2norm_plan_destroy(NULL);
}

/* Row 0 of x_rows with dy = 1: n = x / 2, g = scale = [1.5, 1, 0.75, 2], mean(g n) = -0.1875,
 * dx = (g + 0.1875 n) / 2 and dscale = n, all exact in FP32. */
static const int64_t shape_1x4[2] = {1, 4};
static const float dy_row[4] = {1, 1, 1, 1};

static int row0_gradients_match(const float *dx, const float *dweight) {
    static const float want_dx[4] = {0.84375f, 0.40625f, 0.46875f, 0.90625f};
    int d;
    for (d = 0; d < 4; ++d) {
        if (dx[d] != want_dx[d] || dweight[d] != x_rows[0][d] / 2) return 0;
    }
    return 1;
}

static void test_backward(void) {
    magi2norm_norm *norm = NULL;
    static const int64_t four[1] = {4};
    float dx[4] = {0}, dweight[4] = {0};
    uint16_t dx_bf16[4];
    int d;
    magi2norm_tensor x = tensor(x_rows[0], MAGI2NORM_F32, 2, shape_1x4, NULL);
    magi2norm_tensor dy = tensor(dy_row, MAGI2NORM_F32, 2, shape_1x4, NULL);
    magi2norm_tensor dx_t = tensor(dx, MAGI2NORM_F32, 2, shape_1x4, NULL);
    magi2norm_tensor dx_low = tensor(dx_bf16, MAGI2NORM_BF16, 2, shape_1x4, NULL);
    magi2norm_tensor dw = tensor(dweight, MAGI2NORM_F32, 1, four, NULL);

    CHECK(magi2norm_norm_create(4, 0.0f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 4, &norm) == MAGI2NORM_OK);
    CHECK(magi2norm_norm_backward(norm, &x, &dy, NULL, &dx_t, &dw, MAGI2NORM_DTYPE_UNSET, 0, NULL) == MAGI2NORM_OK);
    CHECK(row0_gradients_match(dx, dweight));
    CHECK(magi2norm_norm_backward(norm, &x, &dy, NULL, &dx_t, &dw, MAGI2NORM_DTYPE_UNSET, 1, NULL) == MAGI2NORM_OK);
    for (d = 0; d < 4; ++d) CHECK(dweight[d] == x_rows[0][d]);
    /* A dx in bf16 needs dx_dtype bf16: refused with the dtype status, dx untouched. */
    memset(dx_bf16, 0x5a, sizeof dx_bf16);
    CHECK(magi2norm_norm_backward(norm, &x, &dy, NULL, &dx_low, &dw, MAGI2NORM_DTYPE_UNSET, 0, NULL) == MAGI2NORM_ERROR_DTYPE);
    CHECK(strstr(magi2norm_last_error(), "dx dtype") != NULL);
    CHECK(dx_bf16[0] == 0x5a5a);
    CHECK(magi2norm_norm_backward(norm, &x, &dy, NULL, &dx_low, &dw, MAGI2NORM_BF16, 0, NULL) == MAGI2NORM_OK);
    CHECK(dx_bf16[0] == 0x3f58 && dx_bf16[1] == 0x3ed0); /* 0.84375, 0.40625 */
    magi2norm_norm_destroy(norm);
}

/* Training: the forward writes the inverse RMS of x_rows (1/2 and 1/sqrt(25/4), eps 0: exact)
 * and the backward from it gives test_backward's exact results; a bf16 inverse RMS is refused. */
static void test_training(void) {
    magi2norm_norm *norm = NULL;
    static const int64_t two[1] = {2};
    static const int64_t one[1] = {1};
    static const int64_t four[1] = {4};
    float y[8] = {0}, inv[2] = {0}, dx[4] = {0}, dweight[4] = {0};
    uint16_t inv_bf16[2] = {0x5a5a, 0x5a5a};
    magi2norm_tensor x = tensor(x_rows, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor out = tensor(y, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor inv_t = tensor(inv, MAGI2NORM_F32, 1, two, NULL);
    magi2norm_tensor inv_low = tensor(inv_bf16, MAGI2NORM_BF16, 1, two, NULL);
    magi2norm_tensor x0 = tensor(x_rows[0], MAGI2NORM_F32, 2, shape_1x4, NULL);
    magi2norm_tensor inv0 = tensor(inv, MAGI2NORM_F32, 1, one, NULL);
    magi2norm_tensor dy = tensor(dy_row, MAGI2NORM_F32, 2, shape_1x4, NULL);
    magi2norm_tensor dx_t = tensor(dx, MAGI2NORM_F32, 2, shape_1x4, NULL);
    magi2norm_tensor dw = tensor(dweight, MAGI2NORM_F32, 1, four, NULL);

    CHECK(magi2norm_norm_create(4, 0.0f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 4, &norm) == MAGI2NORM_OK);
    CHECK(magi2norm_norm_forward_training(norm, &x, NULL, &out, &inv_t, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_OK);
    CHECK(rows_match(y, y_rows));
    CHECK(inv[0] == 0.5f && inv[1] == 0.4f);
    CHECK(strstr(magi2norm_last_variant(), "inverse_rms") != NULL);
    CHECK(magi2norm_norm_forward_training(norm, &x, NULL, &out, &inv_low, MAGI2NORM_DTYPE_UNSET, NULL) == MAGI2NORM_ERROR_DTYPE);
    CHECK(strstr(magi2norm_last_error(), "inverse RMS") != NULL);
    CHECK(inv_bf16[0] == 0x5a5a);
    CHECK(magi2norm_norm_backward_saved(norm, &x0, &dy, &inv0, NULL, &dx_t, &dw, MAGI2NORM_DTYPE_UNSET, 0, NULL) == MAGI2NORM_OK);
    CHECK(row0_gradients_match(dx, dweight));
    CHECK(magi2norm_norm_backward_saved(norm, &x0, &dy, NULL, NULL, &dx_t, &dw, MAGI2NORM_DTYPE_UNSET, 0, NULL) == MAGI2NORM_ERROR_NULL_DATA);
    magi2norm_norm_destroy(norm);
}

/* The mHC logits of x_rows with phi = [[1, 0], [0, 1], [1, 1], [2, 0]]: y_rows @ phi (row 0:
 * 1.5 + 0.75 - 4 = -1.75 and -1 + 0.75 = -0.25; row 1: 0.9 + 6.4 = 7.3 and 0.9), the inverse RMS
 * the forward's; a bf16 phi is refused with the dtype status, the logits untouched. */
static void test_mhc_logits(void) {
    magi2norm_norm *norm = NULL;
    static const int64_t shape_4x2[2] = {4, 2};
    static const int64_t shape_2x2[2] = {2, 2};
    static const int64_t two[1] = {2};
    static const float phi[8] = {1, 0, 0, 1, 1, 1, 2, 0};
    static const uint16_t phi_bf16[8] = {0};
    float logits[4] = {0}, inv[2] = {0};
    magi2norm_tensor x = tensor(x_rows, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor phi_t = tensor(phi, MAGI2NORM_F32, 2, shape_4x2, NULL);
    magi2norm_tensor phi_low = tensor(phi_bf16, MAGI2NORM_BF16, 2, shape_4x2, NULL);
    magi2norm_tensor logits_t = tensor(logits, MAGI2NORM_F32, 2, shape_2x2, NULL);
    magi2norm_tensor inv_t = tensor(inv, MAGI2NORM_F32, 1, two, NULL);

    CHECK(magi2norm_norm_create(4, 0.0f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 4, &norm) == MAGI2NORM_OK);
    CHECK(magi2norm_norm_mhc_logits(norm, &x, NULL, &phi_t, &logits_t, &inv_t) == MAGI2NORM_OK);
    CHECK(close_to(logits[0], -1.75f) && close_to(logits[1], -0.25f) && close_to(logits[2], 7.3f) && close_to(logits[3], 0.9f));
    CHECK(inv[0] == 0.5f && inv[1] == 0.4f);
    CHECK(strstr(magi2norm_last_variant(), "mhc_logits") != NULL);
    logits[0] = 42.0f;
    CHECK(magi2norm_norm_mhc_logits(norm, &x, NULL, &phi_low, &logits_t, NULL) == MAGI2NORM_ERROR_DTYPE);
    CHECK(strstr(magi2norm_last_error(), "phi") != NULL);
    CHECK(logits[0] == 42.0f);
    magi2norm_norm_destroy(norm);
}

/* The backward of test_mhc_logits' logits for dlogits = [[1, 0], [0, 0]]: dphi = y_rows[0] in
 * column 0 (1.5, -1, 0.75, -2), 0 elsewhere; dx and dweight the norm's for dy = phi's column 0,
 * (1, 0, 1, 2), in row 0 (n = (1, -1, 1, -1), g = dy (w + 1) = (1.5, 0, 0.75, 4), mean(g n) =
 * -0.4375, dx = (g - n mean(g n)) / 2; dweight = dy n) and 0 in row 1. Without the inverse RMS:
 * refused. */
static void test_mhc_logits_backward(void) {
    magi2norm_norm *norm = NULL;
    static const int64_t shape_4x2[2] = {4, 2};
    static const int64_t shape_2x2[2] = {2, 2};
    static const int64_t two[1] = {2};
    static const int64_t four[1] = {4};
    static const float phi[8] = {1, 0, 0, 1, 1, 1, 2, 0};
    static const float dlogits[4] = {1, 0, 0, 0};
    static const float inv[2] = {0.5f, 0.4f};
    float dx[8] = {0}, dweight[4] = {0}, dphi[8] = {0};
    int d;
    magi2norm_tensor x = tensor(x_rows, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor phi_t = tensor(phi, MAGI2NORM_F32, 2, shape_4x2, NULL);
    magi2norm_tensor g_t = tensor(dlogits, MAGI2NORM_F32, 2, shape_2x2, NULL);
    magi2norm_tensor inv_t = tensor(inv, MAGI2NORM_F32, 1, two, NULL);
    magi2norm_tensor dx_t = tensor(dx, MAGI2NORM_F32, 2, shape_2x4, NULL);
    magi2norm_tensor dw_t = tensor(dweight, MAGI2NORM_F32, 1, four, NULL);
    magi2norm_tensor dphi_t = tensor(dphi, MAGI2NORM_F32, 2, shape_4x2, NULL);

    CHECK(magi2norm_norm_create(4, 0.0f, 1, 1, MAGI2NORM_DTYPE_UNSET, weight, MAGI2NORM_F32, 4, &norm) == MAGI2NORM_OK);
    CHECK(magi2norm_norm_mhc_logits_backward(norm, &x, NULL, &phi_t, &g_t, NULL, &dx_t, &dw_t, &dphi_t, MAGI2NORM_DTYPE_UNSET, 0) ==
          MAGI2NORM_ERROR_NULL_DATA);
    CHECK(magi2norm_norm_mhc_logits_backward(norm, &x, NULL, &phi_t, &g_t, &inv_t, &dx_t, &dw_t, &dphi_t, MAGI2NORM_DTYPE_UNSET, 0) ==
          MAGI2NORM_OK);
    for (d = 0; d < 4; ++d) CHECK(close_to(dphi[2 * d], y_rows[0][d]) && dphi[2 * d + 1] == 0.0f);
    for (d = 0; d < 4; ++d) CHECK(dx[4 + d] == 0.0f);
    CHECK(close_to(dx[0], 0.96875f) && close_to(dx[1], -0.21875f) && close_to(dx[2], 0.59375f) && close_to(dx[3], 1.78125f));
    CHECK(dweight[0] == 1.0f && dweight[1] == 0.0f && dweight[2] == 1.0f && dweight[3] == -2.0f);
    magi2norm_norm_destroy(norm);
}

int main(void) {
    test_forward();
    test_mhc_logits();
    test_mhc_logits_backward();
    test_backward();
    test_training();
    test_grouping();
    test_plan();
    test_output_shape();
    test_errors();
    test_dlpack();
    test_threads();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("C API: all checks passed\n");
    return 0;
}
