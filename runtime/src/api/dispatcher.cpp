#include <algorithm>
#include <climits>
#include <new>
#include <string>

#include "../views/overlap.hpp"
#include "../views/views.hpp"

namespace magi2norm {

ModalityDispatcher::ModalityDispatcher(const std::int32_t *mapping, std::int64_t num_tokens, std::int64_t num_modality) {
    if (num_modality < 1) throw Error(ErrorCode::config, "num_modality must be >= 1, got " + std::to_string(num_modality));
    // Modality ids are int32: no id reaches a modality past INT32_MAX.
    if (num_modality > INT32_MAX) {
        throw Error(ErrorCode::config, "num_modality must be at most 2^31 - 1 (ids are int32), got " + std::to_string(num_modality));
    }
    if (num_tokens < 0) throw Error(ErrorCode::shape, "negative token count " + std::to_string(num_tokens));
    if (num_tokens > 0 && mapping == nullptr) throw Error(ErrorCode::null_data, "modality mapping pointer is null");
    try {
        group_sizes_.assign(static_cast<std::size_t>(num_modality), 0);
    } catch (const std::bad_alloc &) {
        throw Error(ErrorCode::config, "num_modality " + std::to_string(num_modality) + " needs more memory for its group tables than there is");
    }
    for (std::int64_t t = 0; t < num_tokens; ++t) {
        const std::int32_t m = mapping[t];
        if (m < 0 || m >= num_modality) {
            throw Error(ErrorCode::modality_id, "token " + std::to_string(t) + " has modality id " + std::to_string(m) +
                                                    ", outside [0, " + std::to_string(num_modality) + ")");
        }
        ++group_sizes_[static_cast<std::size_t>(m)];
    }
    cumulative_.assign(group_sizes_.size() + 1, 0);
    for (std::size_t m = 0; m < group_sizes_.size(); ++m) cumulative_[m + 1] = cumulative_[m] + group_sizes_[m];

    // Counting sort: stable, so tokens of one modality keep their order.
    permutation_.resize(static_cast<std::size_t>(num_tokens));
    inverse_.resize(static_cast<std::size_t>(num_tokens));
    std::vector<std::int64_t> next(cumulative_.begin(), cumulative_.end() - 1);
    for (std::int64_t t = 0; t < num_tokens; ++t) {
        const std::int64_t slot = next[static_cast<std::size_t>(mapping[t])]++;
        permutation_[static_cast<std::size_t>(slot)] = t;
        inverse_[static_cast<std::size_t>(t)] = slot;
    }
}

namespace {

// Checks a (source, destination) pair for a permutation along axis 0 of `num_tokens` rows.
void check_permutable(const detail::CheckedView &in, const detail::CheckedView &out, std::int64_t num_tokens) {
    if (in.dtype != out.dtype) {
        throw Error(ErrorCode::dtype, std::string("dispatch input is ") + dtype_name(in.dtype) + " but output is " +
                                          dtype_name(out.dtype));
    }
    if (in.shape != out.shape) throw Error(ErrorCode::shape, "dispatch input and output shapes differ");
    if (in.shape.empty() || in.shape[0] != num_tokens) {
        throw Error(ErrorCode::shape, "dispatch needs axis 0 of length " + std::to_string(num_tokens) + " (the token count)");
    }
    detail::check_no_self_overlap(out, "dispatch output");
    detail::check_disjoint(detail::host_region(in, in.data, "dispatch input"), "dispatch input",
                           detail::host_region(out, out.data, "dispatch output"), "dispatch output",
                           "in-place permutations are not supported");
}

// out[rows_out[i]] = in[rows_in[i]] for every token i, one row (a view of rank - 1) at a time.
void permute_rows(ConstTensorView in, TensorView out, const std::vector<std::int64_t> &source_of) {
    const auto src = detail::check_view(in.data, in.dtype, in.shape, in.strides, "dispatch input");
    const auto dst = detail::check_view(out.data, out.dtype, out.shape, out.strides, "dispatch output");
    check_permutable(src, dst, static_cast<std::int64_t>(source_of.size()));
    const auto elem = static_cast<std::int64_t>(dtype_size(in.dtype));
    detail::CheckedView row = src;
    row.shape.drop_front();
    row.strides.drop_front();
    row.count = src.count / std::max<std::int64_t>(1, src.shape[0]);
    detail::Dims dst_row_strides = dst.strides;
    dst_row_strides.drop_front();
    for (std::size_t i = 0; i < source_of.size(); ++i) {
        row.data = static_cast<const char *>(src.data) + source_of[i] * src.strides[0] * elem;
        detail::copy_elements(row, static_cast<char *>(out.data) + static_cast<std::int64_t>(i) * dst.strides[0] * elem,
                              dst_row_strides);
    }
}

}  // namespace

void ModalityDispatcher::dispatch(ConstTensorView in, TensorView out) const { permute_rows(in, out, permutation_); }

void ModalityDispatcher::undispatch(ConstTensorView in, TensorView out) const { permute_rows(in, out, inverse_); }

}  // namespace magi2norm
