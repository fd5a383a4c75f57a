#include "magi2norm/magi2norm.hpp"
#include "../views/views.hpp"

namespace magi2norm {

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t> &shape) {
    std::vector<std::int64_t> strides(shape.size());
    detail::row_major_strides(shape, strides);
    return strides;
}

std::int64_t element_count(const std::vector<std::int64_t> &shape) { return detail::count_elements(shape); }

}  // namespace magi2norm
