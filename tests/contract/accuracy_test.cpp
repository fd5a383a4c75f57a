// Gate 1 where the summation of the squares matters most: wide rows dominated by one element.
// Once a running FP32 sum holds the large square, each small square is below half its ULP and
// rounds away, so a sum that meets the large element first drops the rest of its chain. Row
// [1, 2^-13, ..., 2^-13] at D = 12288: the small squares are 2^-26 each, 1.8e-4 of the sum
// together; an FP32 sum in 16 interleaved lanes (AVX2) loses a sixteenth of them and moves the
// large output by 5.6e-6 relative, far past gate 1's 1e-6. The large element sits at the start,
// inside and at the end of the row (row 1 mirrors row 0), as summation orders differ in which
// position they get wrong.
// A second small value, 0x1.fep-13, has a square just under half an ULP of 1, so every FP32 add
// of it to the large square rounds it away. A sum that adds k squares in FP32 before going wider
// loses k - 1 of them next to the large one, (k - 1) x 5.9e-8 of the sum, half of that on the
// output: the library's partials of 4 squares move it by about 9e-8; partials of 64 squares by
// 1.9e-6, which fails (checked by building the library with MAGI2NORM_CPU_PARAMS=sum_steps=64;
// with 2^-13 alone, whose squares are a quarter as large, that build passes). The bound does not
// grow with D: rows of 65536 elements hold it as rows of 3072 do.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "norm_case.hpp"

namespace contract {
namespace {

struct DominantCase {
    std::int64_t dim;
    std::int64_t position;  // where the large element sits
};

std::string name_of(const DominantCase &c) {
    return "D" + std::to_string(c.dim) + "_at_" + std::to_string(c.position);
}

std::string case_name(const testing::TestParamInfo<DominantCase> &info) { return name_of(info.param); }
void PrintTo(const DominantCase &c, std::ostream *os) { *os << name_of(c); }

class OneDominantElement : public testing::TestWithParam<DominantCase> {};

TEST_P(OneDominantElement, Gate1) {
    const DominantCase &p = GetParam();
    for (DType in : {DType::f32, DType::bf16}) {
        ref::HostTensor x(in, {2, p.dim});
        for (float small : {0x1p-13f, 0x1.fep-13f}) {
            SCOPED_TRACE(testing::Message() << "small elements " << small);
            for (std::int64_t i = 0; i < x.size(); ++i) x.set(i, small);
            x.set(p.position, 1.0f);                       // row 0: the large element at `position`
            x.set(p.dim + p.dim - 1 - p.position, -1.0f);  // row 1: mirrored
            NormCase c;
            c.x = x.view();
            c.config.dim = p.dim;
            c.weight = ref::HostTensor(DType::f32, {p.dim});  // zeros: scale 1
            expect_contract(c);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Rows, OneDominantElement,
                         testing::Values(DominantCase{3072, 0}, DominantCase{3072, 1537}, DominantCase{12288, 0},
                                         DominantCase{12288, 5}, DominantCase{12288, 6144},
                                         DominantCase{12288, 12287}, DominantCase{65536, 0}, DominantCase{65536, 40000},
                                         DominantCase{65536, 65535}),
                         case_name);

}  // namespace
}  // namespace contract
