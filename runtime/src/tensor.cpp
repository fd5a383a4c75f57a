#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t> &shape) {
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        if (shape[i] > 0 && __builtin_mul_overflow(stride, shape[i], &stride)) {
            throw Error(ErrorCode::overflow, "shape has more elements than fit in int64");
        }
    }
    return strides;
}

std::int64_t element_count(const std::vector<std::int64_t> &shape) {
    std::int64_t count = 1;
    for (std::int64_t extent : shape) {
        if (extent < 0) throw Error(ErrorCode::shape, "negative extent " + std::to_string(extent));
        if (__builtin_mul_overflow(count, extent, &count)) {
            throw Error(ErrorCode::overflow, "shape has more elements than fit in int64");
        }
    }
    return count;
}

}  // namespace magi2norm
