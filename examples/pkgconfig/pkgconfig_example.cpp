// A host built from one file with the pkg-config flags only:
//
//   g++ pkgconfig_example.cpp $(pkg-config --cflags --libs magi2norm) -o pkgconfig_example
//
// It norms two rows handed over as DLPack tensors (as from a framework) and checks the result
// against values worked out by hand.
#include <cmath>
#include <cstdint>
#include <cstdio>

#include <magi2norm/dlpack.hpp>

int main() {
    // D = 4, eps = 0: row [2, -2, 2, -2] has mean square 4, so n = x / 2; row [0, 0, 3, 4] has
    // mean square 25 / 4, so n = x / 2.5. The weight w gives scale w + 1 = [1.5, 1, 0.75, 2].
    float x[2][4] = {{2, -2, 2, -2}, {0, 0, 3, 4}};
    float weight[4] = {0.5f, 0.0f, -0.25f, 1.0f};
    const float expected[2][4] = {{1.5f, -1.0f, 0.75f, -2.0f}, {0.0f, 0.0f, 0.9f, 3.2f}};
    float out[1 + 2 * 4] = {};  // the output starts one float in: a byte_offset

    std::int64_t shape[2] = {2, 4};
    const DLDevice cpu{kDLCPU, 0};
    const DLTensor x_dl{x, cpu, 2, magi2norm::dtype_to_dlpack(magi2norm::DType::f32), shape, nullptr, 0};
    const DLTensor out_dl{out, cpu, 2, magi2norm::dtype_to_dlpack(magi2norm::DType::f32), shape, nullptr, sizeof(float)};

    try {
        const magi2norm::RMSNorm norm({/*dim=*/4, /*eps=*/0.0f},
                                      magi2norm::ConstTensorView(weight, magi2norm::DType::f32, {4}));
        magi2norm::forward(norm, x_dl, magi2norm::Grouping::none(), out_dl);
    } catch (const magi2norm::Error &e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    int failures = out[0] != 0.0f;  // before the byte_offset: untouched
    for (int r = 0; r < 2; ++r) {
        for (int d = 0; d < 4; ++d) {
            const float got = out[1 + r * 4 + d];
            if (std::fabs(got - expected[r][d]) > 1e-6f * (1.0f + std::fabs(expected[r][d]))) {
                std::fprintf(stderr, "y[%d][%d] = %.9g, expected %.9g\n", r, d, got, expected[r][d]);
                ++failures;
            }
        }
    }
    std::printf(failures ? "pkgconfig example: FAILED\n" : "pkgconfig example: ok\n");
    return failures ? 1 : 0;
}
