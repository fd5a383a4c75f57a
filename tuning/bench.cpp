#include "bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "magi2norm/internal.hpp"
#include "magi2norm/float_codecs.hpp"
#if MAGI2NORM_HAS_CUDA
#include "HalideRuntimeCuda.h"
#endif

namespace magi2norm::tuning {

namespace {

// A sample lasts at least this long, so the clock's resolution and a call's fixed cost are
// measured over many calls of a small case.
constexpr double kSampleSeconds = 2e-3;

NormConfig config_of(const TuneCase &c) {
    NormConfig config;
    config.dim = c.dim();
    config.num_modality = c.num_modality;
    config.out_dtype = c.out;
    return config;
}

// Values in [-2, 2) from a fixed seed: every candidate sees the same input.
void fill(std::byte *data, std::int64_t count, DType dtype, std::uint64_t seed) {
    std::uint64_t state = seed;
    for (std::int64_t i = 0; i < count; ++i) {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        const float v = static_cast<float>((z ^ (z >> 31)) >> 40) * (4.0f / 16777216.0f) - 2.0f;
        if (dtype == DType::f32) {
            std::memcpy(data + 4 * i, &v, 4);
        } else {
            const std::uint16_t h = dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
            std::memcpy(data + 2 * i, &h, 2);
        }
    }
}

}  // namespace

#if MAGI2NORM_HAS_CUDA
struct CaseBench::DeviceBuffers {
    struct Buffer {
        halide_dimension_t dim;
        halide_buffer_t buffer{};
    };
    std::vector<std::unique_ptr<Buffer>> in, out;
    std::unique_ptr<Buffer> copy_source, copy_destination;

    static std::unique_ptr<Buffer> make(std::byte *host, std::size_t bytes, bool upload) {
        auto b = std::make_unique<Buffer>();
        b->dim = halide_dimension_t(0, static_cast<std::int32_t>(bytes), 1);
        b->buffer.host = reinterpret_cast<std::uint8_t *>(host);
        b->buffer.type = halide_type_t(halide_type_uint, 8);
        b->buffer.dimensions = 1;
        b->buffer.dim = &b->dim;
        b->buffer.flags = upload ? halide_buffer_flag_host_dirty : 0;
        if (halide_device_malloc(nullptr, &b->buffer, halide_cuda_device_interface()) != 0 ||
            (upload && halide_copy_to_device(nullptr, &b->buffer, halide_cuda_device_interface()) != 0)) {
            throw Error(ErrorCode::device, "the tuner cannot allocate its CUDA buffers");
        }
        return b;
    }
    ~DeviceBuffers() {
        for (auto *list : {&in, &out}) {
            for (auto &b : *list) halide_device_free(nullptr, &b->buffer);
        }
        for (auto *b : {copy_source.get(), copy_destination.get()}) {
            if (b) halide_device_free(nullptr, &b->buffer);
        }
    }
};
#else
struct CaseBench::DeviceBuffers {};
#endif

const void *CaseBench::in_data(std::size_t pair) const {
#if MAGI2NORM_HAS_CUDA
    if (device_) return reinterpret_cast<const void *>(device_->in[pair]->buffer.device);
#endif
    return inputs_[pair].data();
}

void *CaseBench::out_data(std::size_t pair) const {
#if MAGI2NORM_HAS_CUDA
    if (device_) return reinterpret_cast<void *>(device_->out[pair]->buffer.device);
#endif
    return outputs_[pair].data();
}

CaseBench::CaseBench(const TuneCase &tune_case, const ShapeClass &klass, const Machine &machine, Backend backend)
    : case_(tune_case), norm_(config_of(tune_case)) {
    if (case_.backward && backend != Backend::cpu) {
        throw Error(ErrorCode::device, "the tuner times the backward on CPUs only (" + case_.id + ")");
    }
    const std::int64_t elements = case_.elements();
    in_bytes_ = static_cast<std::size_t>(elements) * dtype_size(case_.in);
    // The backward's output is dx, in x's dtype; its dy is in the forward's output dtype.
    out_bytes_ = static_cast<std::size_t>(elements) * dtype_size(case_.backward ? case_.in : case_.out);
    dy_bytes_ = case_.backward ? static_cast<std::size_t>(elements) * dtype_size(case_.out) : 0;
    bytes_ = case_.bytes();
    // From memory: enough sets to cover twice the last-level cache, so each call's data was
    // evicted by the calls before it.
    std::size_t pairs = 1;
    if (klass.from_memory) {
        const auto footprint = static_cast<std::size_t>(2 * std::max<std::int64_t>(machine.l3, 64 << 20));
        pairs = std::max<std::size_t>(1, (footprint + bytes_ - 1) / static_cast<std::size_t>(bytes_));
    }
    for (std::size_t p = 0; p < pairs; ++p) {
        inputs_.emplace_back(in_bytes_);
        outputs_.emplace_back(out_bytes_, std::byte{0xab});
        fill(inputs_.back().data(), elements, case_.in, 1 + p);
        if (case_.backward) {
            dys_.emplace_back(dy_bytes_);
            fill(dys_.back().data(), elements, case_.out, 1000 + p);
        }
    }
    if (case_.num_modality > 1) {
        const std::int64_t t = case_.tokens(), m = case_.num_modality;
        std::vector<std::int64_t> sizes;  // tokens split evenly
        for (std::int64_t i = 0; i < m; ++i) sizes.push_back(t / m + (i < t % m ? 1 : 0));
        grouping_ = Grouping::sizes(std::move(sizes));
    }
    if (case_.backward) {
        dweight_.resize(static_cast<std::size_t>(case_.num_modality * case_.dim()));
        const BackwardViews v = backward_views(0);
        library_ = &detail::backward_kernel(detail::norm_state_of(norm_), v.x, v.dy, grouping_, v.dx, v.dweight, {});
    } else {
        CallOptions options;
        options.stream.backend = backend;
        Memory memory = Memory::host;
#if MAGI2NORM_HAS_CUDA
        if (backend == Backend::cuda) {
            device_ = std::make_shared<DeviceBuffers>();
            for (std::size_t p = 0; p < pairs; ++p) {
                device_->in.push_back(DeviceBuffers::make(inputs_[p].data(), in_bytes_, true));
                device_->out.push_back(DeviceBuffers::make(outputs_[p].data(), out_bytes_, false));
            }
            memory = Memory::device;
        }
#endif
        plan_ = norm_.plan(ConstTensorView(nullptr, case_.in, case_.shape, {}, memory), grouping_,
                           TensorView(nullptr, case_.out, case_.shape, {}, memory), options);
        library_ = &detail::choose_kernel(detail::call_plan_of(plan_), in_data(0), out_data(0));
    }
    copy_.kind = measure::CopyKind::ordinary_stores;
    copy_.bytes = (static_cast<std::size_t>(bytes_) / 2 + 63) / 64 * 64;
    copy_.pairs = pairs;
    // A copy small enough for the caches runs on one thread: starting threads would cost it more
    // than its bytes.
    const bool small = copy_.bytes < (std::size_t{8} << 20);
    copy_.threads = small ? 1 : num_threads();
    copy_.runs = small ? 16 : 1;  // a small copy is timed over several, like a sample's calls
    copy_.summary = measure::Summary::mean;
    // Calibrated on the library's kernel.
    run(nullptr, 0);
    const auto start = std::chrono::steady_clock::now();
    run(nullptr, 0);
    const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    calls_per_sample_ = static_cast<int>(std::clamp(std::ceil(kSampleSeconds / std::max(one, 1e-9)), 1.0, 100000.0));
}

CaseBench::BackwardViews CaseBench::backward_views(std::size_t pair) {
    return {ConstTensorView(inputs_[pair].data(), case_.in, case_.shape), ConstTensorView(dys_[pair].data(), case_.out, case_.shape),
            TensorView(outputs_[pair].data(), case_.in, case_.shape),
            TensorView(dweight_.data(), DType::f32, {static_cast<std::int64_t>(dweight_.size())})};
}

void CaseBench::run(const detail::KernelEntry *kernel, std::size_t pair) {
    if (case_.backward) {
        const BackwardViews v = backward_views(pair);
        detail::run_backward(detail::norm_state_of(norm_), v.x, v.dy, grouping_, v.dx, v.dweight, {}, kernel);
    } else {
        detail::run_call(detail::call_plan_of(plan_), kernel, in_data(pair), out_data(pair), nullptr);
    }
    if (read_output_) {
        // The consumer of the output: one pass over its bytes, as the model's next layer makes.
        const auto *words = reinterpret_cast<const std::uint64_t *>(outputs_[pair].data());
        std::uint64_t sum = 0;
        for (std::size_t i = 0; i < out_bytes_ / 8; ++i) sum += words[i];
        sink_ += sum;
    }
}

double CaseBench::sample(const detail::KernelEntry *kernel) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_per_sample_; ++i) {
        run(kernel, next_pair_);
        next_pair_ = (next_pair_ + 1) % inputs_.size();
    }
#if MAGI2NORM_HAS_CUDA
    if (device_) halide_device_sync(nullptr, &device_->out.front()->buffer);  // the calls are queued, not done
#endif
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls_per_sample_;
}

CaseBench::Times CaseBench::measure(const std::vector<const detail::KernelEntry *> &kernels, int rounds, bool with_copy,
                                    bool cut_hopeless) {
    Times times;
    times.kernels.resize(kernels.size());
    for (const detail::KernelEntry *k : kernels) sample(k);  // untimed: code and pages warm
    for (int r = 0; r < rounds; ++r) {
        for (std::size_t i = 0; i < kernels.size(); ++i) {
            const std::size_t k = (i + static_cast<std::size_t>(r)) % kernels.size();
            times.kernels[k].push_back(sample(kernels[k]));
        }
        if (with_copy) times.copy.push_back(copy_gbps());
        if (cut_hopeless && hopeless(times)) break;
    }
    return times;
}

const detail::KernelEntry *CaseBench::library_kernel(int stores) const {
    if (case_.backward) return nullptr;
    const detail::CallPlan &p = detail::call_plan_of(plan_);
    return library_->form == detail::Form::paired_words ? p.paired_words[stores] : p.elements[stores];
}

double CaseBench::copy_gbps() {
#if MAGI2NORM_HAS_CUDA
    if (device_) {
        // A device-to-device copy of half the call's bytes (read plus written: the call's).
        if (!device_->copy_source) {
            device_->copy_source = DeviceBuffers::make(inputs_[0].data(), static_cast<std::size_t>(bytes_) / 2, true);
            device_->copy_destination = DeviceBuffers::make(outputs_[0].data(), static_cast<std::size_t>(bytes_) / 2, false);
        }
        const auto start = std::chrono::steady_clock::now();
        halide_buffer_copy(nullptr, &device_->copy_source->buffer, halide_cuda_device_interface(), &device_->copy_destination->buffer);
        halide_device_sync(nullptr, &device_->copy_destination->buffer);
        return static_cast<double>(bytes_) / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 1e9;
    }
#endif
    return meter_.bytes_per_second(copy_) / 1e9;
}

std::vector<unsigned char> CaseBench::output(const detail::KernelEntry *kernel) {
    std::memset(outputs_[0].data(), 0xab, out_bytes_);
    std::fill(dweight_.begin(), dweight_.end(), -7.0f);  // a weight gradient the call did not write shows
#if MAGI2NORM_HAS_CUDA
    if (device_) {
        run(kernel, 0);
        halide_buffer_t &b = device_->out[0]->buffer;
        b.flags = halide_buffer_flag_device_dirty;
        if (halide_copy_to_host(nullptr, &b) != 0) throw Error(ErrorCode::device, "the tuner cannot read its CUDA output back");
        const auto *bytes = reinterpret_cast<const unsigned char *>(outputs_[0].data());
        return std::vector<unsigned char>(bytes, bytes + out_bytes_);
    }
#endif
    run(kernel, 0);
    const auto *bytes = reinterpret_cast<const unsigned char *>(outputs_[0].data());
    std::vector<unsigned char> result(bytes, bytes + out_bytes_);
    const auto *dweight = reinterpret_cast<const unsigned char *>(dweight_.data());
    result.insert(result.end(), dweight, dweight + dweight_.size() * sizeof(float));
    return result;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

bool hopeless(const CaseBench::Times &t) {
    if (t.kernels.size() < 3 || t.kernels[2].empty()) return false;
    double library_slowest = 0;
    for (int k = 0; k < 2; ++k) library_slowest = std::max(library_slowest, *std::max_element(t.kernels[k].begin(), t.kernels[k].end()));
    return *std::min_element(t.kernels[2].begin(), t.kernels[2].end()) > 2 * library_slowest;
}

CaseTimes case_times(const CaseBench::Times &t) {
    CaseTimes c;
    const double a = median(t.kernels[0]), b = median(t.kernels[1]);
    c.library_s = std::min(a, b);
    c.noise = std::max(a, b) / std::min(a, b) - 1;
    c.schedule_s = median(t.kernels[2]);
    c.copy_gbps = median(t.copy);
    c.rounds = static_cast<int>(t.kernels[2].size());
    return c;
}

}  // namespace magi2norm::tuning
