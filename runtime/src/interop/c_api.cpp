// The C ABI over the C++ API: every exception becomes a status and a thread-local message.
#include "magi2norm/c_api.h"

#include <exception>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "magi2norm/dlpack.hpp"
#include "magi2norm/magi2norm.hpp"

struct magi2norm_norm {
    magi2norm::RMSNorm norm;
};

struct magi2norm_plan {
    magi2norm::Plan plan;
    bool by_ids;
};

namespace {

using magi2norm::ErrorCode;

static_assert(MAGI2NORM_ERROR_SHAPE == static_cast<int>(ErrorCode::shape) + 1 &&
                  MAGI2NORM_ERROR_DEVICE == static_cast<int>(ErrorCode::device) + 1 &&
                  MAGI2NORM_ERROR_INTERNAL == MAGI2NORM_ERROR_DEVICE + 1,
              "magi2norm_status mirrors magi2norm::ErrorCode");

thread_local std::string last_error;

// Runs `body`, turning what it throws into a status and the message of magi2norm_last_error.
template <typename Body>
magi2norm_status guarded(Body &&body) noexcept {
    try {
        body();
        last_error.clear();
        return MAGI2NORM_OK;
    } catch (const magi2norm::Error &e) {
        last_error = e.what();
        return static_cast<magi2norm_status>(static_cast<int>(e.code()) + 1);
    } catch (const std::bad_alloc &) {
        last_error = "magi2norm: internal: out of memory";
    } catch (const std::exception &e) {
        last_error = std::string("magi2norm: internal: ") + e.what();
    } catch (...) {
        last_error = "magi2norm: internal: unknown exception";
    }
    return MAGI2NORM_ERROR_INTERNAL;
}

[[noreturn]] void fail(ErrorCode code, const std::string &message) { throw magi2norm::Error(code, message); }

template <typename T>
T &required(T *p, const char *what) {
    if (p == nullptr) fail(ErrorCode::null_data, std::string(what) + " is NULL");
    return *p;
}

magi2norm::DType dtype_of(magi2norm_dtype dtype, const char *what) {
    switch (dtype) {
    case MAGI2NORM_F32: return magi2norm::DType::f32;
    case MAGI2NORM_BF16: return magi2norm::DType::bf16;
    case MAGI2NORM_F16: return magi2norm::DType::f16;
    default: fail(ErrorCode::dtype, std::string(what) + " dtype " + std::to_string(static_cast<int>(dtype)) + " is not f32, bf16 or f16");
    }
}

std::optional<magi2norm::DType> optional_dtype(magi2norm_dtype dtype, const char *what) {
    if (dtype == MAGI2NORM_DTYPE_UNSET) return std::nullopt;
    return dtype_of(dtype, what);
}

magi2norm::Memory memory_of(magi2norm_memory memory, const char *what) {
    switch (memory) {
    case MAGI2NORM_MEMORY_HOST: return magi2norm::Memory::host;
    case MAGI2NORM_MEMORY_DEVICE: return magi2norm::Memory::device;
    default: fail(ErrorCode::device, std::string(what) + " memory " + std::to_string(static_cast<int>(memory)) + " is not host or device");
    }
}

std::vector<std::int64_t> axes(int rank, const std::int64_t *values, const char *what) {
    if (rank < 0) fail(ErrorCode::shape, std::string(what) + " rank " + std::to_string(rank) + " is negative");
    if (values == nullptr) return {};
    return std::vector<std::int64_t>(values, values + rank);
}

std::vector<std::int64_t> shape_of(int rank, const std::int64_t *shape, const char *what) {
    if (rank > 0 && shape == nullptr) fail(ErrorCode::shape, std::string(what) + " shape is NULL");
    return axes(rank, shape, what);
}

magi2norm::TensorView view_of(const magi2norm_tensor &t, const char *what) {
    return magi2norm::TensorView(t.data, dtype_of(t.dtype, what), shape_of(t.rank, t.shape, what),
                                 axes(t.rank, t.strides, what), memory_of(t.memory, what));
}

magi2norm::Grouping grouping_of(const magi2norm_grouping *g) {
    if (g == nullptr) return magi2norm::Grouping::none();
    switch (g->kind) {
    case MAGI2NORM_GROUPING_NONE: return magi2norm::Grouping::none();
    case MAGI2NORM_GROUPING_SIZES:
        if (g->count < 0) fail(ErrorCode::grouping, "group size count " + std::to_string(g->count) + " is negative");
        if (g->count > 0 && g->sizes == nullptr) fail(ErrorCode::null_data, "group sizes pointer is NULL");
        return magi2norm::Grouping::sizes(g->count > 0 ? std::vector<std::int64_t>(g->sizes, g->sizes + g->count)
                                                       : std::vector<std::int64_t>{});
    case MAGI2NORM_GROUPING_IDS:
        return magi2norm::Grouping::ids(g->ids, g->count, memory_of(g->ids_memory, "modality ids"));
    default: fail(ErrorCode::grouping, "grouping kind " + std::to_string(static_cast<int>(g->kind)) + " is not none, sizes or ids");
    }
}

magi2norm::Stream stream_of(const magi2norm_stream *s) {
    magi2norm::Stream stream;
    if (s == nullptr) return stream;
    switch (s->backend) {
    case MAGI2NORM_BACKEND_DEFAULT: break;
    case MAGI2NORM_BACKEND_CPU: stream.backend = magi2norm::Backend::cpu; break;
    case MAGI2NORM_BACKEND_OPENCL: stream.backend = magi2norm::Backend::opencl; break;
    case MAGI2NORM_BACKEND_CUDA: stream.backend = magi2norm::Backend::cuda; break;
    default: fail(ErrorCode::device, "backend " + std::to_string(static_cast<int>(s->backend)) + " is not cpu, opencl or cuda");
    }
    stream.context = s->context;
    stream.stream = s->stream;
    return stream;
}

}  // namespace

extern "C" {

const char *magi2norm_status_name(magi2norm_status status) {
    if (status == MAGI2NORM_OK) return "ok";
    if (status == MAGI2NORM_ERROR_INTERNAL) return "internal";
    if (status > MAGI2NORM_OK && status < MAGI2NORM_ERROR_INTERNAL) {
        return magi2norm::error_code_name(static_cast<ErrorCode>(static_cast<int>(status) - 1));
    }
    return "unknown";
}

const char *magi2norm_last_error(void) { return last_error.c_str(); }

magi2norm_status magi2norm_norm_create(int64_t dim, float eps, int64_t num_modality, int64_t num_patterns,
                                       magi2norm_dtype out_dtype, const void *weight, magi2norm_dtype weight_dtype,
                                       int64_t weight_count, magi2norm_norm **norm) {
    return guarded([&] {
        magi2norm_norm *&result = required(norm, "norm result pointer");
        result = nullptr;
        const magi2norm::NormConfig config{dim, eps, num_modality, num_patterns, optional_dtype(out_dtype, "output")};
        if (weight == nullptr && weight_count == 0) {
            result = new magi2norm_norm{magi2norm::RMSNorm(config)};
        } else {
            const magi2norm::ConstTensorView view(weight, dtype_of(weight_dtype, "weight"), {weight_count});
            result = new magi2norm_norm{magi2norm::RMSNorm(config, view)};
        }
    });
}

void magi2norm_norm_destroy(magi2norm_norm *norm) { delete norm; }

magi2norm_status magi2norm_norm_output_shape(const magi2norm_norm *norm, int rank, const int64_t *shape,
                                             int64_t *out_shape, int capacity, int *out_rank) {
    return guarded([&] {
        const auto &n = required(norm, "norm");
        int &result_rank = required(out_rank, "out_rank");
        const std::vector<std::int64_t> result = n.norm.output_shape(shape_of(rank, shape, "input"));
        result_rank = static_cast<int>(result.size());
        if (result_rank <= capacity) {
            if (result_rank > 0 && out_shape == nullptr) fail(ErrorCode::null_data, "out_shape is NULL");
            for (int i = 0; i < result_rank; ++i) out_shape[i] = result[i];
        }
    });
}

magi2norm_status magi2norm_norm_forward(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                        const magi2norm_grouping *grouping, const magi2norm_tensor *out,
                                        magi2norm_dtype out_dtype, const magi2norm_stream *stream) {
    return guarded([&] {
        required(norm, "norm").norm.forward(view_of(required(x, "input"), "input"), grouping_of(grouping),
                                            view_of(required(out, "output"), "output"),
                                            optional_dtype(out_dtype, "output"), stream_of(stream));
    });
}

magi2norm_status magi2norm_norm_forward_dlpack(const magi2norm_norm *norm, const DLTensor *x,
                                               const magi2norm_grouping *grouping, const DLTensor *out,
                                               magi2norm_dtype out_dtype, const magi2norm_stream *stream) {
    return guarded([&] {
        magi2norm::forward(required(norm, "norm").norm, required(x, "input"), grouping_of(grouping),
                           required(out, "output"), optional_dtype(out_dtype, "output"), stream_of(stream));
    });
}

magi2norm_status magi2norm_norm_backward(const magi2norm_norm *norm, const magi2norm_tensor *x, const magi2norm_tensor *dy,
                                         const magi2norm_grouping *grouping, const magi2norm_tensor *dx,
                                         const magi2norm_tensor *dweight, magi2norm_dtype dx_dtype, int accumulate_dweight,
                                         const magi2norm_stream *stream) {
    return guarded([&] {
        magi2norm::BackwardOptions options;
        options.dx_dtype = optional_dtype(dx_dtype, "dx");
        options.accumulate_dweight = accumulate_dweight != 0;
        options.stream = stream_of(stream);
        required(norm, "norm").norm.backward(view_of(required(x, "input"), "input"), view_of(required(dy, "dy"), "dy"),
                                             grouping_of(grouping), view_of(required(dx, "dx"), "dx"),
                                             view_of(required(dweight, "dweight"), "dweight"), options);
    });
}

magi2norm_status magi2norm_norm_forward_training(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                                 const magi2norm_grouping *grouping, const magi2norm_tensor *out,
                                                 const magi2norm_tensor *inverse_rms, magi2norm_dtype out_dtype,
                                                 const magi2norm_stream *stream) {
    return guarded([&] {
        magi2norm::CallOptions options;
        options.out_dtype = optional_dtype(out_dtype, "output");
        options.stream = stream_of(stream);
        options.inverse_rms = view_of(required(inverse_rms, "inverse RMS"), "inverse RMS");
        required(norm, "norm").norm.forward(view_of(required(x, "input"), "input"), grouping_of(grouping),
                                            view_of(required(out, "output"), "output"), options);
    });
}

magi2norm_status magi2norm_norm_backward_saved(const magi2norm_norm *norm, const magi2norm_tensor *x, const magi2norm_tensor *dy,
                                               const magi2norm_tensor *inverse_rms, const magi2norm_grouping *grouping,
                                               const magi2norm_tensor *dx, const magi2norm_tensor *dweight,
                                               magi2norm_dtype dx_dtype, int accumulate_dweight, const magi2norm_stream *stream) {
    return guarded([&] {
        magi2norm::BackwardOptions options;
        options.dx_dtype = optional_dtype(dx_dtype, "dx");
        options.accumulate_dweight = accumulate_dweight != 0;
        options.stream = stream_of(stream);
        options.inverse_rms = view_of(required(inverse_rms, "inverse RMS"), "inverse RMS");
        required(norm, "norm").norm.backward(view_of(required(x, "input"), "input"), view_of(required(dy, "dy"), "dy"),
                                             grouping_of(grouping), view_of(required(dx, "dx"), "dx"),
                                             view_of(required(dweight, "dweight"), "dweight"), options);
    });
}

magi2norm_status magi2norm_norm_mhc_logits(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                           const magi2norm_grouping *grouping, const magi2norm_tensor *phi,
                                           const magi2norm_tensor *logits, const magi2norm_tensor *inverse_rms) {
    return guarded([&] {
        magi2norm::MhcLogitsOptions options;
        if (inverse_rms) options.inverse_rms = view_of(*inverse_rms, "inverse RMS");
        required(norm, "norm").norm.mhc_logits(view_of(required(x, "input"), "input"), grouping_of(grouping),
                                               view_of(required(phi, "phi"), "phi"), view_of(required(logits, "logits"), "logits"),
                                               options);
    });
}

magi2norm_status magi2norm_norm_mhc_logits_backward(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                                    const magi2norm_grouping *grouping, const magi2norm_tensor *phi,
                                                    const magi2norm_tensor *dlogits, const magi2norm_tensor *inverse_rms,
                                                    const magi2norm_tensor *dx, const magi2norm_tensor *dweight,
                                                    const magi2norm_tensor *dphi, magi2norm_dtype dx_dtype, int accumulate_dweight) {
    return guarded([&] {
        magi2norm::BackwardOptions options;
        options.dx_dtype = optional_dtype(dx_dtype, "dx");
        options.accumulate_dweight = accumulate_dweight != 0;
        options.inverse_rms = view_of(required(inverse_rms, "inverse RMS"), "inverse RMS");
        required(norm, "norm").norm.mhc_logits_backward(
            view_of(required(x, "input"), "input"), grouping_of(grouping), view_of(required(phi, "phi"), "phi"),
            view_of(required(dlogits, "dlogits"), "dlogits"), view_of(required(dx, "dx"), "dx"),
            view_of(required(dweight, "dweight"), "dweight"), view_of(required(dphi, "dphi"), "dphi"), options);
    });
}

magi2norm_status magi2norm_plan_create(const magi2norm_norm *norm, const magi2norm_tensor *x,
                                       const magi2norm_grouping *grouping, const magi2norm_tensor *out,
                                       magi2norm_dtype out_dtype, const magi2norm_stream *stream, magi2norm_plan **plan) {
    return guarded([&] {
        magi2norm_plan *&result = required(plan, "plan result pointer");
        result = nullptr;
        magi2norm::CallOptions options;
        options.out_dtype = optional_dtype(out_dtype, "output");
        options.stream = stream_of(stream);
        const magi2norm::Grouping g = grouping_of(grouping);
        magi2norm::Plan made = required(norm, "norm").norm.plan(view_of(required(x, "input"), "input"), g,
                                                                 view_of(required(out, "output"), "output"), options);
        result = new magi2norm_plan{std::move(made), g.kind() == magi2norm::Grouping::Kind::ids};
    });
}

magi2norm_status magi2norm_plan_run(const magi2norm_plan *plan, const void *x, void *out, const int32_t *ids) {
    return guarded([&] {
        const magi2norm_plan &p = required(plan, "plan");
        if (p.by_ids) {
            p.plan.run(x, out, ids);
        } else {
            p.plan.run(x, out);
        }
    });
}

void magi2norm_plan_destroy(magi2norm_plan *plan) { delete plan; }

void magi2norm_set_num_threads(int n) { magi2norm::set_num_threads(n); }

int magi2norm_num_threads(void) { return magi2norm::num_threads(); }

const char *magi2norm_last_variant(void) { return magi2norm::last_variant(); }

void magi2norm_set_parallel_for(magi2norm_parallel_for parallel_for, void *context) {
    magi2norm::set_parallel_for(parallel_for, context);
}

}  // extern "C"
