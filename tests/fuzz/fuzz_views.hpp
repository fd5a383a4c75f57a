// The C ABI fuzz targets' views: dtypes, shapes and strides (0, negative, past the library's
// limits) decoded from the input, placed at byte offsets in one arena; whether a call on them may
// be made at all; the arena's bytes; the checks every call shares (a refusal names its error and
// writes nothing).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "fuzz_input.hpp"
#include "magi2norm/c_api.h"
#include "reference/host_tensor.hpp"

namespace fuzz {

constexpr std::int64_t kArenaBytes = 8192;
constexpr std::int64_t kHuge = std::int64_t{1} << 31;  // the library refuses strides from here on

// F32, BF16, F16 or a value outside the enum.
magi2norm_dtype pick_dtype(Input &in);
std::size_t bytes_of(magi2norm_dtype dtype);
bool known(magi2norm_dtype dtype);
magi2norm::DType dtype_of(magi2norm_dtype dtype);

struct View {
    std::int64_t offset = 0;  // bytes into the arena
    bool null = false;
    magi2norm_dtype dtype = MAGI2NORM_F32;
    ref::Shape shape, strides;
    bool given_strides = false;
};

// A view of shape `wanted`, or now and then another rank or other extents.
View pick_view(Input &in, const ref::Shape &wanted);
// Lowest and highest element offsets; nullopt when they leave int64.
std::optional<std::pair<__int128, __int128>> span(const View &v);
std::int64_t count(const View &v);
bool malformed(const View &v);
// Whether the call may be made: every element the view names lies in the arena, or the view is
// one the library refuses by its stated rules whatever its pointer (malformed, a stride or
// offset past its limits). Any other view points outside memory the caller owns.
bool callable(const View &v);
// The same for a view the library reads and writes on the host whatever its strides (the
// backward's dweight, which no kernel indexes, so the kernels' 2^31 limit does not refuse it).
bool callable_any_stride(const View &v);
// Whether the view names elements, all of them in the arena (a call may accept it).
bool in_arena(const View &v);
magi2norm_tensor tensor_of(const View &v, unsigned char *arena);
// The view's elements in `arena` (strides resolved), to read as a ConstTensorView.
magi2norm::ConstTensorView const_view(const View &v, const unsigned char *arena);
// Marks the bytes of the view's elements.
void mark_elements(const View &v, std::vector<bool> &written);

// The arena's bytes from a seed: any bit patterns, NaN and Inf included; with `ordinary`, the
// elements of `inputs` (those in the arena) rewritten with values uniform in [-2^e, 2^e], e in
// [-3, 3], and a NaN or an Inf now and then, so that the numerical checks run.
std::vector<unsigned char> arena_of(std::uint32_t seed, bool ordinary = false, std::initializer_list<const View *> inputs = {});
// A refused call named its error and left the arena as it was.
void check_refusal(magi2norm_status status, const std::vector<unsigned char> &arena, const std::vector<unsigned char> &before);

}  // namespace fuzz
