#include "backward_partials.hpp"

#include <algorithm>
#include <cstring>

#include "../devices/staging.hpp"
#include "backward_abi.h"
#include "magi2norm/float_codecs.hpp"

namespace magi2norm::detail {

namespace {

float decode_value(DType dtype, const unsigned char *p) {
    if (dtype == DType::f32) {
        float v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    std::uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

void encode_value(DType dtype, float v, unsigned char *p) {
    if (dtype == DType::f32) {
        std::memcpy(p, &v, sizeof v);
        return;
    }
    const std::uint16_t bits = dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
    std::memcpy(p, &bits, sizeof bits);
}

// dweight's elements, contiguous in `packed`: cast(dscale), or cast(float32(old) + dscale) from
// the old values `packed` holds.
void pack_dweight(DType dtype, const std::vector<float> &dscale, bool accumulate, std::vector<unsigned char> &packed) {
    const std::size_t elem = dtype_size(dtype);
    for (std::size_t i = 0; i < dscale.size(); ++i) {
        const float old = accumulate ? decode_value(dtype, packed.data() + i * elem) : 0.0f;
        encode_value(dtype, accumulate ? old + dscale[i] : dscale[i], packed.data() + i * elem);
    }
}

}  // namespace

void write_dweight(const BackwardPlan &g, CallContext &call, const std::vector<float> &dscale, void *dweight, bool accumulate) {
    std::vector<unsigned char> packed(dscale.size() * dtype_size(g.dweight.dtype));
    if (g.p.memory == Memory::device) {
        if (accumulate) copy_to_host(g.p.backend, &call, dweight, packed.data(), packed.size());
        pack_dweight(g.dweight.dtype, dscale, accumulate, packed);
        copy_to_device(g.p.backend, &call, packed.data(), dweight, packed.size());
        return;
    }
    if (accumulate) copy_to_contiguous(g.dweight, dweight, packed.data());
    pack_dweight(g.dweight.dtype, dscale, accumulate, packed);
    copy_from_contiguous(packed.data(), g.dweight, dweight);
}


void add_partials(const float *partials, std::int64_t blocks, std::int64_t row, double *sum, float *dscale) {
    std::fill(sum, sum + row, 0.0);
    for (std::int64_t b = 0; b < blocks; ++b) {
        const float *block = partials + b * row;
        for (std::int64_t i = 0; i < row; ++i) sum[i] += static_cast<double>(block[i]);
    }
    for (std::int64_t i = 0; i < row; ++i) dscale[i] = static_cast<float>(sum[i]);
}

std::int64_t partial_block_tokens(std::int64_t rows) {
    return std::max<std::int64_t>(1, abi::kPartialTerms / std::max<std::int64_t>(1, rows));
}

}  // namespace magi2norm::detail
