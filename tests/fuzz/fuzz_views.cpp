#include "fuzz_views.hpp"

#include <cmath>
#include <cstring>
#include <string>

namespace fuzz {

magi2norm_dtype pick_dtype(Input &in) {
    const auto choice = in.in(0, 8);
    return choice < 3 ? static_cast<magi2norm_dtype>(choice) : choice == 3 ? static_cast<magi2norm_dtype>(7) : MAGI2NORM_F32;
}

std::size_t bytes_of(magi2norm_dtype dtype) { return dtype == MAGI2NORM_F32 ? 4 : 2; }
bool known(magi2norm_dtype dtype) { return dtype == MAGI2NORM_F32 || dtype == MAGI2NORM_BF16 || dtype == MAGI2NORM_F16; }

View pick_view(Input &in, const ref::Shape &wanted) {
    View v;
    v.dtype = pick_dtype(in);
    v.shape = wanted;
    if (in.in(0, 7) == 0) {  // another rank or other extents
        v.shape.resize(static_cast<std::size_t>(in.in(0, 5)), 1);
        for (auto &extent : v.shape) extent = in.in(-1, 6);
    }
    v.given_strides = in.flag();
    v.strides = ref::row_major_strides(v.shape);
    if (v.given_strides) {
        for (std::size_t i = 0; i < v.shape.size(); ++i) {
            switch (in.in(0, 7)) {
            case 0: v.strides[i] = 0; break;
            case 1: v.strides[i] = -v.strides[i]; break;
            case 2: v.strides[i] = in.in(-40, 40); break;
            case 3: v.strides[i] = (in.flag() ? 1 : -1) * (kHuge << in.in(0, 31)); break;
            case 4: v.strides[i] = v.strides[i] * 2 + in.in(0, 3); break;
            default: break;
            }
        }
    }
    v.offset = in.in(0, kArenaBytes);
    v.null = in.in(0, 31) == 0;
    return v;
}

std::optional<std::pair<__int128, __int128>> span(const View &v) {
    __int128 lo = 0, hi = 0;
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
        const __int128 reach = static_cast<__int128>(v.shape[i] - 1) * v.strides[i];
        (reach < 0 ? lo : hi) += reach;
    }
    const __int128 limit = static_cast<__int128>(INT64_MAX);
    if (lo < -limit || hi > limit) return std::nullopt;
    return std::make_pair(lo, hi);
}

std::int64_t count(const View &v) {
    std::int64_t n = 1;
    for (const auto extent : v.shape) {
        if (extent <= 0) return 0;
        n *= extent;
    }
    return n;
}

bool malformed(const View &v) {
    for (const auto extent : v.shape) {
        if (extent < 0) return true;
    }
    return !known(v.dtype) || v.shape.size() > 8;
}

namespace {

bool huge_stride(const View &v) {
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
        if (v.shape[i] > 1 && (v.strides[i] >= kHuge || v.strides[i] <= -kHuge)) return true;
    }
    return false;
}

bool within(const View &v) {
    const auto range = span(v);
    if (!range) return false;
    const __int128 elem = static_cast<__int128>(bytes_of(v.dtype));
    return v.offset + range->first * elem >= 0 && v.offset + (range->second + 1) * elem <= kArenaBytes;
}

}  // namespace

bool callable(const View &v) {
    if (malformed(v) || count(v) == 0 || v.null || huge_stride(v)) return true;
    return !span(v) || within(v);
}

bool callable_any_stride(const View &v) {
    if (malformed(v) || count(v) == 0 || v.null) return true;
    return !span(v) || within(v);
}

bool in_arena(const View &v) { return !malformed(v) && count(v) > 0 && !v.null && !huge_stride(v) && within(v); }

magi2norm_tensor tensor_of(const View &v, unsigned char *arena) {
    magi2norm_tensor t{};
    t.data = v.null ? nullptr : arena + v.offset;
    t.dtype = v.dtype;
    t.rank = static_cast<int>(v.shape.size());
    t.shape = v.shape.data();
    t.strides = v.given_strides ? v.strides.data() : nullptr;
    t.memory = MAGI2NORM_MEMORY_HOST;
    return t;
}

magi2norm::DType dtype_of(magi2norm_dtype dtype) { return static_cast<magi2norm::DType>(dtype); }

magi2norm::ConstTensorView const_view(const View &v, const unsigned char *arena) {
    return {arena + v.offset, dtype_of(v.dtype), v.shape, v.strides};
}

void mark_elements(const View &v, std::vector<bool> &written) {
    const auto size = static_cast<std::int64_t>(bytes_of(v.dtype));
    ref::for_each_offset_pair(v.shape, v.strides, v.strides, [&](std::int64_t, std::int64_t offset, std::int64_t) {
        for (std::int64_t b = 0; b < size; ++b) written[static_cast<std::size_t>(v.offset + offset * size + b)] = true;
    });
}

namespace {

void rewrite_values(const View &v, unsigned char *arena, std::uint32_t &state) {
    const auto next = [&] {
        state = state * 1664525u + 1013904223u;
        return state >> 8;
    };
    const magi2norm::ConstTensorView view = const_view(v, arena);
    ref::for_each_offset_pair(v.shape, v.strides, v.strides, [&](std::int64_t, std::int64_t offset, std::int64_t) {
        const std::uint32_t r = next();
        float value = std::ldexp(static_cast<float>(r % 65536) / 32768.0f - 1.0f, static_cast<int>(r >> 16) % 7 - 3);
        if (r % 997 == 0) value = (r & 1) ? NAN : INFINITY;
        ref::store_value(view.dtype, const_cast<void *>(view.data), offset, value);
    });
}

}  // namespace

std::vector<unsigned char> arena_of(std::uint32_t seed, bool ordinary, std::initializer_list<const View *> inputs) {
    std::vector<unsigned char> arena(kArenaBytes);
    std::uint32_t state = 0x9e3779b9u ^ seed;
    for (auto &b : arena) {
        state = state * 1664525u + 1013904223u;
        b = static_cast<unsigned char>(state >> 24);
    }
    std::uint32_t value_state = seed;
    for (const View *v : inputs) {
        if (ordinary && in_arena(*v)) rewrite_values(*v, arena.data(), value_state);
    }
    return arena;
}

void check_refusal(magi2norm_status status, const std::vector<unsigned char> &arena, const std::vector<unsigned char> &before) {
    if (status == MAGI2NORM_ERROR_INTERNAL || std::strcmp(magi2norm_status_name(status), "unknown") == 0) {
        finding(std::string("refused without a named error: ") + magi2norm_last_error());
    }
    if (arena != before) finding(std::string("a refused call wrote: ") + magi2norm_last_error());
}

}  // namespace fuzz
