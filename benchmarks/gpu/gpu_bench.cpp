// The MAGI-2 norms on a CUDA GPU, forward and backward, on device memory with the caller's
// stream: time per call and TB/s, against a device-to-device copy moving as many bytes (read +
// written) in the same run. One line of JSON per case and pass on stdout (scripts/gpu_check.sh
// turns them into tables). The first and last rows are copied back and compared with the
// formula (the backward's dx in float64), so a wrong kernel cannot look fast.
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
#include "model_norms.hpp"

namespace {

using magi2norm::DType;

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

// `count` values in [-2, 2) and never zero, as `dtype`'s bits (f32 or bf16), from `seed`.
std::vector<unsigned char> random_values(DType dtype, std::size_t count, std::uint64_t seed) {
    std::vector<unsigned char> host(count * magi2norm::dtype_size(dtype));
    std::uint64_t state = 0x9e3779b97f4a7c15ull ^ seed;
    for (std::size_t i = 0; i < count; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const float v = (float(state >> 40) / 16777216.0f - 0.5f) * 4.0f + 0.001f;
        if (dtype == DType::f32) {
            std::memcpy(host.data() + 4 * i, &v, 4);
        } else {
            std::uint32_t u;
            std::memcpy(&u, &v, 4);
            const std::uint16_t bits = std::uint16_t(u >> 16);
            std::memcpy(host.data() + 2 * i, &bits, 2);
        }
    }
    return host;
}

void *device_copy(const std::vector<unsigned char> &host) {
    void *p = nullptr;
    check(cudaMalloc(&p, host.size()), "malloc");
    check(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice), "upload");
    return p;
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

// One JSON line: the pass's time, its TB/s and the copy's for the same bytes, the worst error.
void report(const char *pass, const magi2norm::measure::ModelNorm &c, std::int64_t tokens, float ms, std::size_t bytes, float copy_ms, double max_rel) {
    const double b = double(bytes);
    std::printf("{\"pass\": \"%s\", \"name\": \"%s\", \"tokens\": %lld, \"in_dtype\": \"%s\", \"out_dtype\": \"%s\", "
                "\"ms\": %.4f, \"tbps\": %.3f, \"copy_tbps\": %.3f, \"fraction_of_copy\": %.3f, \"max_rel_err\": %.2e}\n",
                pass, c.label().c_str(), (long long)tokens, magi2norm::dtype_name(c.x), magi2norm::dtype_name(c.out), ms,
                b / (ms * 1e-3) / 1e12, b / (copy_ms * 1e-3) / 1e12, copy_ms / ms, max_rel);
    std::fflush(stdout);
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

    for (const magi2norm::measure::ModelNorm &c : magi2norm::measure::model_norms()) {
        for (std::int64_t tokens : token_counts) {
            std::int64_t row = 1;
            for (std::int64_t e : c.row) row *= e;
            const std::int64_t dim = c.row.back();
            std::vector<std::int64_t> shape = {tokens};
            shape.insert(shape.end(), c.row.begin(), c.row.end());
            const std::size_t in_bytes = std::size_t(tokens * row) * magi2norm::dtype_size(c.x);
            const std::size_t out_bytes = std::size_t(tokens * row) * magi2norm::dtype_size(c.out);

            // Random, never-zero x and dy (bf16 or f32 bits built on the host, then copied over).
            const std::size_t elements = std::size_t(tokens * row);
            const std::vector<unsigned char> host = random_values(c.x, elements, std::uint64_t(tokens));
            const std::vector<unsigned char> dy_host = random_values(c.out, elements, std::uint64_t(tokens) + 1);
            // The copy ceiling moves as many bytes as the pass it is beside: the backward's (x and
            // dy read, dx written) are the most; it reads and writes half each.
            const std::size_t backward_bytes = 2 * in_bytes + out_bytes;
            void *x = device_copy(host), *dy = device_copy(dy_host), *y = nullptr, *dx = nullptr, *dweight = nullptr;
            void *copy_src = nullptr, *copy_dst = nullptr;
            check(cudaMalloc(&y, out_bytes), "malloc y");
            check(cudaMalloc(&dx, in_bytes), "malloc dx");
            check(cudaMalloc(&dweight, std::size_t(dim) * 4), "malloc dweight");
            check(cudaMalloc(&copy_src, backward_bytes / 2), "malloc copy");
            check(cudaMalloc(&copy_dst, backward_bytes / 2), "malloc copy");

            magi2norm::RMSNorm norm({dim, 1e-6f, 1, 1, c.out});
            const magi2norm::ConstTensorView xv(x, c.x, shape, {}, magi2norm::Memory::device);
            const magi2norm::TensorView yv(y, c.out, shape, {}, magi2norm::Memory::device);
            const float ms = best_ms(stream, iters, [&] { norm.forward(xv, magi2norm::Grouping::none(), yv, std::nullopt, on_stream); });
            const auto copy_ms = [&](std::size_t bytes) {
                return best_ms(stream, iters, [&] {
                    check(cudaMemcpyAsync(copy_dst, copy_src, bytes / 2, cudaMemcpyDeviceToDevice, stream), "copy");
                });
            };

            // Check the first and the last row against the FP32 formula (weight 0: scale 1).
            double max_rel = 0;
            std::vector<unsigned char> out_row(std::size_t(dim) * magi2norm::dtype_size(c.out));
            for (std::int64_t r : {std::int64_t(0), tokens * (row / dim) - 1}) {
                check(cudaMemcpy(out_row.data(), static_cast<char *>(y) + r * out_row.size(), out_row.size(), cudaMemcpyDeviceToHost), "download");
                double sum = 0;
                for (std::int64_t d = 0; d < dim; ++d) {
                    const double v = load(host.data(), c.x, r * dim + d);
                    sum += v * v;
                }
                const float inv = 1.0f / std::sqrt(float(sum) / float(dim) + 1e-6f);
                for (std::int64_t d = 0; d < dim; ++d) {
                    const float want = load(host.data(), c.x, r * dim + d) * inv;
                    const float got = load(out_row.data(), c.out, d);
                    max_rel = std::max(max_rel, std::fabs(double(got) - want) / (1e-6 + std::fabs(want)));
                }
            }
            report("forward", c, tokens, ms, in_bytes + out_bytes, copy_ms(in_bytes + out_bytes), max_rel);

            // The backward of the same norm: dy in the forward's output dtype, dx in x's, dweight
            // in FP32; dx of the first and last row against the float64 formula (scale 1).
            const magi2norm::ConstTensorView dyv(dy, c.out, shape, {}, magi2norm::Memory::device);
            const magi2norm::TensorView dxv(dx, c.x, shape, {}, magi2norm::Memory::device);
            const magi2norm::TensorView dwv(dweight, DType::f32, {dim}, {}, magi2norm::Memory::device);
            magi2norm::BackwardOptions backward;
            backward.stream = on_stream;
            const float backward_ms = best_ms(stream, iters, [&] { norm.backward(xv, dyv, magi2norm::Grouping::none(), dxv, dwv, backward); });
            double backward_rel = 0;
            std::vector<unsigned char> dx_row(std::size_t(dim) * magi2norm::dtype_size(c.x));
            for (std::int64_t r : {std::int64_t(0), tokens * (row / dim) - 1}) {
                check(cudaMemcpy(dx_row.data(), static_cast<char *>(dx) + r * dx_row.size(), dx_row.size(), cudaMemcpyDeviceToHost), "download");
                double sum = 0, gn = 0;
                for (std::int64_t d = 0; d < dim; ++d) sum += std::pow(double(load(host.data(), c.x, r * dim + d)), 2);
                const double inv = 1.0 / std::sqrt(sum / double(dim) + 1e-6);
                for (std::int64_t d = 0; d < dim; ++d) {
                    gn += double(load(dy_host.data(), c.out, r * dim + d)) * load(host.data(), c.x, r * dim + d) * inv;
                }
                for (std::int64_t d = 0; d < dim; ++d) {
                    const double n = load(host.data(), c.x, r * dim + d) * inv;
                    const double want = inv * (load(dy_host.data(), c.out, r * dim + d) - n * gn / double(dim));
                    backward_rel = std::max(backward_rel, std::fabs(load(dx_row.data(), c.x, d) - want) / (1e-5 + std::fabs(want)));
                }
            }
            report("backward", c, tokens, backward_ms, backward_bytes, copy_ms(backward_bytes), backward_rel);
            for (void *p : {x, dy, y, dx, dweight, copy_src, copy_dst}) cudaFree(p);
        }
    }
    cudaStreamDestroy(stream);
    return 0;
}
