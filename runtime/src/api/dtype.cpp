// DType names and sizes.
#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

const char *dtype_name(DType dtype) {
    switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    }
    return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
    if (name == "f32" || name == "float32" || name == "F32" || name == "float") return DType::f32;
    if (name == "bf16" || name == "bfloat16" || name == "BF16") return DType::bf16;
    if (name == "f16" || name == "float16" || name == "half" || name == "F16") return DType::f16;
    return std::nullopt;
}

std::size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

}  // namespace magi2norm
