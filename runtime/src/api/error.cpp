#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

const char *error_code_name(ErrorCode code) {
    switch (code) {
    case ErrorCode::shape: return "shape";
    case ErrorCode::dtype: return "dtype";
    case ErrorCode::stride: return "stride";
    case ErrorCode::grouping: return "grouping";
    case ErrorCode::weight: return "weight";
    case ErrorCode::modality_id: return "modality_id";
    case ErrorCode::null_data: return "null_data";
    case ErrorCode::overlap: return "overlap";
    case ErrorCode::overflow: return "overflow";
    case ErrorCode::config: return "config";
    case ErrorCode::format: return "format";
    case ErrorCode::io: return "io";
    case ErrorCode::device: return "device";
    }
    return "unknown";
}

Error::Error(ErrorCode code, const std::string &message)
    : std::runtime_error(std::string("magi2norm: ") + error_code_name(code) + ": " + message), code_(code) {}

}  // namespace magi2norm
