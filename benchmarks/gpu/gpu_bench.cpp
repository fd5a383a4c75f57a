// The MAGI-2 norms on a CUDA GPU, on device memory with the caller's stream: time per call and
// TB/s, against a device-to-device copy moving as many bytes (read + written) in the same run.
// One line of JSON per case on stdout (scripts/gpu_check.sh turns them into a table). The first
// and last rows are copied back and compared with the FP32 formula, so a wrong kernel cannot
// look fast.
//
//   magi2norm_gpu_bench [--tokens 16384,65536] [--iters 20]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "magi2norm/float_codecs.hpp"
#include "magi2norm/magi2norm.hpp"

namespace {

using magi2norm::DType;

struct NormCase {
    const char *name;
    std::vector<std::int64_t> row_shape;  // the shape after the token axis
    DType in, out;
};

// SPEC.md's MAGI-2 Preview table, M = 1.
const NormCase kCases[] = {
    {"pre_norm", {3072}, DType::bf16, DType::bf16},
    {"qk_norm", {24, 128}, DType::bf16, DType::f32},
    {"mhc_norm_f32", {12288}, DType::bf16, DType::f32},
    {"mhc_norm_bf16", {12288}, DType::bf16, DType::bf16},
    {"final_norm", {12288}, DType::f32, DType::f32},
};

void check(cudaError_t status, const char *what) {
    if (status != cudaSuccess) {
        std::fprintf(stderr, "gpu_bench: %s: %s\n", what, cudaGetErrorString(status));
        std::exit(1);
    }
}

float load(const unsigned char *data, DType dtype, std::int64_t i) {
    if (dtype == DType::f32) {
        float f;
        std::memcpy(&f, data + 4 * i, 4);
        return f;
    }
    std::uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    return magi2norm::bf16_to_f32(bits);  // inputs and outputs here are f32 or bf16
}

// Milliseconds per call of `body`, best of `iters` timed with events on `stream`.
template <typename Body>
float best_ms(cudaStream_t stream, int iters, Body body) {
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
    body();  // warm-up (first call uploads the scale, JIT-compiles the PTX)
    float best = 1e30f;
    for (int i = 0; i < iters; ++i) {
        check(cudaEventRecord(start, stream), "record");
        body();
        check(cudaEventRecord(stop, stream), "record");
        check(cudaEventSynchronize(stop), "sync");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
        best = std::min(best, ms);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return best;
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<std::int64_t> token_counts = {16384, 65536};
    int iters = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--tokens") == 0) {
            token_counts.clear();
            const std::string list = argv[i + 1];
            for (std::size_t start = 0; start < list.size();) {
                const std::size_t end = std::min(list.find(',', start), list.size());
                token_counts.push_back(std::stoll(list.substr(start, end - start)));
                start = end + 1;
            }
        }
    }
    std::string why;
    if (!magi2norm::backend_available(magi2norm::Backend::cuda, &why)) {
        std::fprintf(stderr, "gpu_bench: %s\n", why.c_str());
        return 1;
    }
    cudaStream_t stream;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    const magi2norm::Stream on_stream{magi2norm::Backend::cuda, nullptr, stream};

    for (const NormCase &c : kCases) {
        for (std::int64_t tokens : token_counts) {
            std::int64_t row = 1;
            for (std::int64_t e : c.row_shape) row *= e;
            const std::int64_t dim = c.row_shape.back();
            std::vector<std::int64_t> shape = {tokens};
            shape.insert(shape.end(), c.row_shape.begin(), c.row_shape.end());
            const std::size_t in_bytes = std::size_t(tokens * row) * magi2norm::dtype_size(c.in);
            const std::size_t out_bytes = std::size_t(tokens * row) * magi2norm::dtype_size(c.out);

            // Random, never-zero input (bf16 or f32 bits built on the host, then copied over).
            std::vector<unsigned char> host(in_bytes);
            std::uint64_t state = 0x9e3779b97f4a7c15ull ^ std::uint64_t(tokens);
            for (std::size_t i = 0; i < in_bytes / magi2norm::dtype_size(c.in); ++i) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                const float v = (float(state >> 40) / 16777216.0f - 0.5f) * 4.0f + 0.001f;
                if (c.in == DType::f32) {
                    std::memcpy(host.data() + 4 * i, &v, 4);
                } else {
                    std::uint32_t u;
                    std::memcpy(&u, &v, 4);
                    const std::uint16_t bits = std::uint16_t(u >> 16);
                    std::memcpy(host.data() + 2 * i, &bits, 2);
                }
            }
            // The copy ceiling moves as many bytes as the norm: it reads and writes half each.
            const std::size_t half = (in_bytes + out_bytes) / 2;
            void *x = nullptr, *y = nullptr, *copy_src = nullptr, *copy_dst = nullptr;
            check(cudaMalloc(&x, in_bytes), "malloc x");
            check(cudaMalloc(&y, out_bytes), "malloc y");
            check(cudaMalloc(&copy_src, half), "malloc copy");
            check(cudaMalloc(&copy_dst, half), "malloc copy");
            check(cudaMemcpy(x, host.data(), in_bytes, cudaMemcpyHostToDevice), "upload");

            magi2norm::RMSNorm norm({dim, 1e-6f, 1, 1, c.out});
            const magi2norm::ConstTensorView xv(x, c.in, shape, {}, magi2norm::Memory::device);
            const magi2norm::TensorView yv(y, c.out, shape, {}, magi2norm::Memory::device);
            const float ms = best_ms(stream, iters, [&] { norm.forward(xv, magi2norm::Grouping::none(), yv, std::nullopt, on_stream); });
            const float copy_ms = best_ms(stream, iters, [&] {
                check(cudaMemcpyAsync(copy_dst, copy_src, half, cudaMemcpyDeviceToDevice, stream), "copy");
            });

            // Check the first and the last row against the FP32 formula (weight 0: scale 1).
            double max_rel = 0;
            std::vector<unsigned char> out_row(std::size_t(dim) * magi2norm::dtype_size(c.out));
            for (std::int64_t r : {std::int64_t(0), tokens * (row / dim) - 1}) {
                check(cudaMemcpy(out_row.data(), static_cast<char *>(y) + r * out_row.size(), out_row.size(), cudaMemcpyDeviceToHost), "download");
                double sum = 0;
                for (std::int64_t d = 0; d < dim; ++d) {
                    const double v = load(host.data(), c.in, r * dim + d);
                    sum += v * v;
                }
                const float inv = 1.0f / std::sqrt(float(sum) / float(dim) + 1e-6f);
                for (std::int64_t d = 0; d < dim; ++d) {
                    const float want = load(host.data(), c.in, r * dim + d) * inv;
                    const float got = load(out_row.data(), c.out, d);
                    max_rel = std::max(max_rel, std::fabs(double(got) - want) / (1e-6 + std::fabs(want)));
                }
            }
            const double bytes = double(in_bytes + out_bytes);
            std::printf("{\"name\": \"%s\", \"tokens\": %lld, \"in_dtype\": \"%s\", \"out_dtype\": \"%s\", "
                        "\"ms\": %.4f, \"tbps\": %.3f, \"copy_tbps\": %.3f, \"fraction_of_copy\": %.3f, "
                        "\"max_rel_err\": %.2e}\n",
                        c.name, (long long)tokens, magi2norm::dtype_name(c.in), magi2norm::dtype_name(c.out), ms,
                        bytes / (ms * 1e-3) / 1e12, bytes / (copy_ms * 1e-3) / 1e12, copy_ms / ms, max_rel);
            std::fflush(stdout);
            cudaFree(x);
            cudaFree(y);
            cudaFree(copy_src);
            cudaFree(copy_dst);
        }
    }
    cudaStreamDestroy(stream);
    return 0;
}
