// magi2norm._extension: the library's forward and backward on tensors described by integers (data
// pointer, dtype code, shape, strides), the device by a memory kind and a CUDA stream handle. It
// links the static library and no libtorch, so one build serves every torch version; the torch
// ops (magi2norm/ops.py) describe their tensors and allocate every output.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include <magi2norm/magi2norm.hpp>

#include "output_pool.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using Shape = std::vector<std::int64_t>;

// Dtype codes: magi2norm::DType's order (f32, bf16, f16), the package's _DTYPE_CODES.
magi2norm::DType dtype_of(int code) {
    if (code < 0 || code > 2) throw magi2norm::Error(magi2norm::ErrorCode::dtype, "dtype code " + std::to_string(code) + " is not f32 (0), bf16 (1) or f16 (2)");
    return static_cast<magi2norm::DType>(code);
}

// Where the data is: host memory on the CPU backend, or device memory on CUDA with the caller's
// stream (torch.cuda.current_stream().cuda_stream) on the calling thread's current context.
struct Device {
    bool cuda = false;
    std::uintptr_t stream = 0;
    magi2norm::Memory memory() const { return cuda ? magi2norm::Memory::device : magi2norm::Memory::host; }
    magi2norm::Stream handle() const {
        magi2norm::Stream s;
        s.backend = cuda ? magi2norm::Backend::cuda : magi2norm::Backend::cpu;
        s.stream = reinterpret_cast<void *>(stream);
        return s;
    }
};

magi2norm::TensorView view(std::uintptr_t data, int dtype, Shape shape, Shape strides, const Device &device) {
    return {reinterpret_cast<void *>(data), dtype_of(dtype), std::move(shape), std::move(strides), device.memory()};
}

// Grouping: kind 0 none; 1 group sizes (int64, host memory, `count` of them); 2 per-token ids
// (int32, `count` tokens, in the data's memory).
magi2norm::Grouping grouping_of(int kind, std::uintptr_t data, std::int64_t count, const Device &device) {
    switch (kind) {
    case 0: return magi2norm::Grouping::none();
    case 1: {
        const auto *sizes = reinterpret_cast<const std::int64_t *>(data);
        return magi2norm::Grouping::sizes(std::vector<std::int64_t>(sizes, sizes + count));
    }
    case 2: return magi2norm::Grouping::ids(reinterpret_cast<const std::int32_t *>(data), count, device.memory());
    default: throw magi2norm::Error(magi2norm::ErrorCode::grouping, "grouping kind " + std::to_string(kind) + " is not none (0), sizes (1) or ids (2)");
    }
}

// One norm: its configuration and the scale made from a weight (read once, from host memory).
class Norm {
public:
    Norm(std::int64_t dim, double eps, std::int64_t num_modality, std::int64_t num_patterns, std::uintptr_t weight,
         int weight_dtype, Shape weight_shape, Shape weight_strides)
        : norm_(magi2norm::NormConfig{dim, static_cast<float>(eps), num_modality, num_patterns, std::nullopt},
                view(weight, weight_dtype, std::move(weight_shape), std::move(weight_strides), Device{})) {}

    // `inverse_rms` 0: the forward alone; else also each row's inverse RMS (FP32) there.
    void forward(std::uintptr_t x, int x_dtype, Shape x_shape, Shape x_strides, std::uintptr_t out, int out_dtype,
                 Shape out_shape, Shape out_strides, std::uintptr_t inverse_rms, Shape inverse_rms_shape,
                 Shape inverse_rms_strides, int grouping_kind, std::uintptr_t grouping, std::int64_t grouping_count,
                 bool cuda, std::uintptr_t stream) const {
        const Device device{cuda, stream};
        const magi2norm::TensorView xv = view(x, x_dtype, std::move(x_shape), std::move(x_strides), device);
        const magi2norm::TensorView ov = view(out, out_dtype, std::move(out_shape), std::move(out_strides), device);
        const magi2norm::Grouping g = grouping_of(grouping_kind, grouping, grouping_count, device);
        magi2norm::CallOptions options;
        options.out_dtype = ov.dtype;
        options.stream = device.handle();
        if (inverse_rms != 0) options.inverse_rms = view(inverse_rms, 0, std::move(inverse_rms_shape), std::move(inverse_rms_strides), device);
        nb::gil_scoped_release unlocked;
        norm_.forward(xv, g, ov, options);
    }

    // `inverse_rms` 0: the backward sums the rows' squares itself; else the forward's inverse RMS.
    void backward(std::uintptr_t x, int x_dtype, Shape x_shape, Shape x_strides, std::uintptr_t dy, int dy_dtype,
                  Shape dy_shape, Shape dy_strides, std::uintptr_t inverse_rms, Shape inverse_rms_shape,
                  Shape inverse_rms_strides, std::uintptr_t dx, int dx_dtype, Shape dx_shape, Shape dx_strides,
                  std::uintptr_t dweight, int dweight_dtype, Shape dweight_shape, Shape dweight_strides, int grouping_kind,
                  std::uintptr_t grouping, std::int64_t grouping_count, bool cuda, std::uintptr_t stream) const {
        const Device device{cuda, stream};
        const magi2norm::TensorView xv = view(x, x_dtype, std::move(x_shape), std::move(x_strides), device);
        const magi2norm::TensorView dyv = view(dy, dy_dtype, std::move(dy_shape), std::move(dy_strides), device);
        const magi2norm::TensorView dxv = view(dx, dx_dtype, std::move(dx_shape), std::move(dx_strides), device);
        const magi2norm::TensorView dwv = view(dweight, dweight_dtype, std::move(dweight_shape), std::move(dweight_strides), device);
        const magi2norm::Grouping g = grouping_of(grouping_kind, grouping, grouping_count, device);
        magi2norm::BackwardOptions options;
        options.dx_dtype = dxv.dtype;
        options.stream = device.handle();
        if (inverse_rms != 0) options.inverse_rms = view(inverse_rms, 0, std::move(inverse_rms_shape), std::move(inverse_rms_strides), device);
        nb::gil_scoped_release unlocked;
        norm_.backward(xv, dyv, g, dxv, dwv, options);
    }

private:
    magi2norm::RMSNorm norm_;
};

}  // namespace

NB_MODULE(_extension, m) {
    m.doc() = "The magi2norm library's forward and backward on tensors described by integers";
    // magi2norm::Error as magi2norm.Error (a ValueError), its message led by the error's code.
    // Kept for the life of the process: the translator may run until the interpreter ends.
    static PyObject *error_type = PyErr_NewException("magi2norm.Error", PyExc_ValueError, nullptr);
    m.attr("Error") = nb::borrow(error_type);
    nb::register_exception_translator([](const std::exception_ptr &p, void *) {
        try {
            std::rethrow_exception(p);
        } catch (const magi2norm::Error &e) {
            const std::string message = std::string(magi2norm::error_code_name(e.code())) + ": " + e.what();
            PyErr_SetString(error_type, message.c_str());
        }
    });
    nb::class_<Norm>(m, "Norm")
        .def(nb::init<std::int64_t, double, std::int64_t, std::int64_t, std::uintptr_t, int, Shape, Shape>(),
             "dim"_a, "eps"_a, "num_modality"_a, "num_patterns"_a, "weight"_a, "weight_dtype"_a, "weight_shape"_a,
             "weight_strides"_a)
        .def("forward", &Norm::forward)
        .def("backward", &Norm::backward);
    m.def("pooled_tensor", [](std::vector<std::int64_t> shape, std::uint8_t code, std::uint8_t bits) {
        PyObject *capsule = magi2norm_python::pooled_tensor(shape, code, bits);
        if (capsule == nullptr) throw nb::python_error();
        return nb::steal(capsule);
    }, "A DLPack capsule of a new C-contiguous CPU tensor in a pooled block (output_pool.hpp)");
    m.def("release_pool", &magi2norm_python::release_pool);
    m.def("pooled_bytes", &magi2norm_python::pooled_bytes);
    m.def("last_variant", [] { return std::string(magi2norm::last_variant()); },
          "The library variant the calling thread's last kernel ran");
    m.def("cuda_available", [] { return magi2norm::backend_available(magi2norm::Backend::cuda); });
}
