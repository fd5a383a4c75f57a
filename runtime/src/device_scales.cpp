#include "device_scales.hpp"

#include <string>

namespace magi2norm {

const float *RMSNorm::DeviceScales::get(const std::vector<float> &scale, Backend backend, void *context, void *stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &e : entries_) {
        if (e->backend == backend && e->context == context) return reinterpret_cast<const float *>(e->buffer.device);
    }
    auto e = std::make_unique<Entry>();
    e->backend = backend;
    e->context = context;
    e->host = scale;
    e->host.push_back(0.0f);
    e->dim = halide_dimension_t(0, static_cast<std::int32_t>(e->host.size()), 1);
    e->buffer = halide_buffer_t{};
    e->buffer.host = reinterpret_cast<std::uint8_t *>(e->host.data());
    e->buffer.type = halide_type_t(halide_type_float, 32);
    e->buffer.dimensions = 1;
    e->buffer.dim = &e->dim;
    e->buffer.flags = halide_buffer_flag_host_dirty;
    detail::CallContext call{context, stream};
    if (halide_copy_to_device(&call, &e->buffer, detail::device_interface(backend)) != 0) {
        throw Error(ErrorCode::device, std::string("cannot upload the scale to the ") + backend_name(backend) +
                                           " device: " + detail::take_halide_error());
    }
    entries_.push_back(std::move(e));
    return reinterpret_cast<const float *>(entries_.back()->buffer.device);
}

RMSNorm::DeviceScales::~DeviceScales() {
    for (const auto &e : entries_) {
        detail::CallContext call{e->context, nullptr};
        halide_device_free(&call, &e->buffer);
    }
}

}  // namespace magi2norm
