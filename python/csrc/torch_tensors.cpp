#include "torch_tensors.hpp"

#include <string>

#include <torch/csrc/stable/ops.h>

#include "torch_runtime.hpp"

namespace magi2norm_torch {

using torch::headeronly::ScalarType;

magi2norm::DType dtype_of(ScalarType type, const char *what) {
    switch (type) {
    case ScalarType::Float: return magi2norm::DType::f32;
    case ScalarType::BFloat16: return magi2norm::DType::bf16;
    case ScalarType::Half: return magi2norm::DType::f16;
    default:
        throw magi2norm::Error(magi2norm::ErrorCode::dtype, std::string(what) + " has dtype " +
                                                                 torch::headeronly::toString(type) +
                                                                 "; the kernels take float32, bfloat16 or float16");
    }
}

magi2norm::DType dtype_of_code(std::int64_t code) {
    if (code < 0 || code > 2) {
        throw magi2norm::Error(magi2norm::ErrorCode::dtype, "out_dtype code " + std::to_string(code) +
                                                                " is not float32 (0), bfloat16 (1) or float16 (2)");
    }
    return static_cast<magi2norm::DType>(code);
}

ScalarType scalar_type_of(magi2norm::DType dtype) {
    switch (dtype) {
    case magi2norm::DType::bf16: return ScalarType::BFloat16;
    case magi2norm::DType::f16: return ScalarType::Half;
    default: return ScalarType::Float;
    }
}

namespace {

std::vector<std::int64_t> to_vector(torch::headeronly::IntHeaderOnlyArrayRef values) {
    return {values.begin(), values.end()};
}

magi2norm::Memory memory_of(const Tensor &t) {
    return t.is_cuda() ? magi2norm::Memory::device : magi2norm::Memory::host;
}

}  // namespace

magi2norm::TensorView view_of(const Tensor &t, const char *what) {
    return {t.data_ptr(), dtype_of(t.scalar_type(), what), to_vector(t.sizes()), to_vector(t.strides()), memory_of(t)};
}

magi2norm::Grouping grouping_of(const Tensor &x, const std::optional<Tensor> &group_sizes,
                                const std::optional<Tensor> &modality_ids, std::optional<Tensor> &held) {
    if (modality_ids) {
        if (modality_ids->dim() != 1) {
            throw magi2norm::Error(magi2norm::ErrorCode::grouping, "modality_ids must be one-dimensional, got " +
                                                                       std::to_string(modality_ids->dim()) + " axes");
        }
        const bool ready = modality_ids->scalar_type() == ScalarType::Int && modality_ids->is_contiguous() &&
                           modality_ids->is_cuda() == x.is_cuda() &&
                           modality_ids->get_device_index() == x.get_device_index();
        held = ready ? *modality_ids
                     : torch::stable::contiguous(torch::stable::to(*modality_ids, ScalarType::Int, std::nullopt, x.device()));
        return magi2norm::Grouping::ids(static_cast<const std::int32_t *>(held->data_ptr()), held->numel(),
                                        memory_of(*held));
    }
    if (group_sizes) {
        if (group_sizes->dim() != 1) {
            throw magi2norm::Error(magi2norm::ErrorCode::grouping, "group_sizes must be one-dimensional, got " +
                                                                       std::to_string(group_sizes->dim()) + " axes");
        }
        // A dispatcher's sizes are int32 on x's device; a CUDA tensor's are read back once here.
        Tensor sizes = *group_sizes;
        if (sizes.is_cuda() || sizes.scalar_type() != ScalarType::Long || !sizes.is_contiguous()) {
            sizes = torch::stable::contiguous(
                torch::stable::to(sizes, ScalarType::Long, std::nullopt, torch::stable::Device(torch::headeronly::DeviceType::CPU)));
        }
        const auto *values = static_cast<const std::int64_t *>(sizes.data_ptr());
        return magi2norm::Grouping::sizes(std::vector<std::int64_t>(values, values + sizes.numel()));
    }
    return magi2norm::Grouping::none();
}

magi2norm::Stream stream_for(const Tensor &x) {
    magi2norm::Stream stream;
    if (x.is_cuda()) {
        stream.backend = magi2norm::Backend::cuda;
        stream.stream = current_cuda_stream(x.get_device_index());
    } else {
        stream.backend = magi2norm::Backend::cpu;
    }
    return stream;
}

}  // namespace magi2norm_torch
