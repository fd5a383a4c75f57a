#include "device_scales.hpp"

#include <string>

#include "opencl_context.hpp"

namespace magi2norm::detail {

// CUDA: one Halide device buffer holding the scale and the zero after it; the device pointer
// is an address, so the zero's is one past the scale.
void DeviceScales::upload_cuda(Entry &e, const std::vector<float> &scale, void *stream) {
    e.host = scale;
    e.host.push_back(0.0f);
    e.dim = halide_dimension_t(0, static_cast<std::int32_t>(e.host.size()), 1);
    e.buffer = halide_buffer_t{};
    e.buffer.host = reinterpret_cast<std::uint8_t *>(e.host.data());
    e.buffer.type = halide_type_t(halide_type_float, 32);
    e.buffer.dimensions = 1;
    e.buffer.dim = &e.dim;
    e.buffer.flags = halide_buffer_flag_host_dirty;
    CallContext call{e.context, stream};
    // The copy is queued on the first caller's stream; waiting for it once means a later call on
    // another stream of the context cannot read the scale before it has arrived.
    if (halide_copy_to_device(&call, &e.buffer, device_interface(e.backend)) != 0 ||
        halide_device_sync(&call, &e.buffer) != 0) {
        throw Error(ErrorCode::device, std::string("cannot upload the scale to the ") + backend_name(e.backend) +
                                           " device: " + take_halide_error());
    }
    const auto *device = reinterpret_cast<const float *>(e.buffer.device);
    e.handles = {device, reinterpret_cast<const std::int32_t *>(device + scale.size())};
}

DeviceScales::Handles DeviceScales::get(const std::vector<float> &scale, Backend backend,
                                                          void *context, void *stream) {
    // The scale upload may be the first Halide runtime call of the process: its errors must reach
    // the capture (not Halide's default handler, which aborts) and CUDA must use the caller's
    // context and stream.
    install_halide_hooks();
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &e : entries_) {
        if (e->backend == backend && e->context == context) return e->handles;
    }
    auto e = std::make_unique<Entry>();
    e->backend = backend;
    e->context = context;
    if (backend == Backend::opencl) {
        // A cl_mem cannot be offset like a pointer: the zero gets a buffer of its own.
        const std::int32_t zero = 0;
        void *table = opencl_upload(context, scale.data(), scale.size() * sizeof(float));
        try {
            e->handles = {static_cast<const float *>(table),
                          static_cast<const std::int32_t *>(opencl_upload(context, &zero, sizeof zero))};
        } catch (...) {
            opencl_release(table);
            throw;
        }
    } else {
        upload_cuda(*e, scale, stream);
    }
    entries_.push_back(std::move(e));
    return entries_.back()->handles;
}

DeviceScales::~DeviceScales() {
    for (const auto &e : entries_) {
        if (e->backend == Backend::opencl) {
            opencl_release(const_cast<float *>(e->handles.scale));
            opencl_release(const_cast<std::int32_t *>(e->handles.zero_id));
        } else {
            CallContext call{e->context, nullptr};
            halide_device_free(&call, &e->buffer);
        }
    }
}

}  // namespace magi2norm::detail
