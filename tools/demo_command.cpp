// For each norm of the model: synthetic data, the best forward time, a sampled check against a
// scalar reference, and the memcpy bandwidth for the same traffic as the yardstick.
#include "demo_command.hpp"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "cli_args.hpp"
#include "copy_ceilings.hpp"
#include "demo_cases.hpp"
#include "demo_report.hpp"
#include "magi2norm/magi2norm.hpp"
#include "row_check.hpp"
#include "run_times.hpp"

namespace magi2norm::cli {
namespace {

constexpr std::int64_t kDefaultTokens = 4096;
constexpr int kRepeats = 5;
constexpr int kSampleTokens = 16;

std::uint64_t traffic_bytes(const DemoCase &c, const RMSNorm &norm) {
    const auto elements = static_cast<std::uint64_t>(element_count(c.shape));
    std::uint64_t bytes = elements * (dtype_size(c.in_dtype) + dtype_size(c.out_dtype));
    bytes += norm.scale().size() * sizeof(float);
    if (c.grouping == Grouping::Kind::ids) bytes += static_cast<std::uint64_t>(c.shape.front()) * sizeof(std::int32_t);
    return bytes;
}

// Memory for `pairs` calls of a case: copies of its input, and outputs aligned to a cache line
// as a tensor allocator gives them (PyTorch's CPU allocator: 64 bytes), so that large outputs
// take the streaming-store variants.
class CallBuffers {
public:
    CallBuffers(const DemoCase &c, const DemoData &data, std::size_t pairs)
        : in_dtype_(c.in_dtype), out_dtype_(c.out_dtype), shape_(c.shape),
          out_bytes_(static_cast<std::size_t>(element_count(c.shape)) * dtype_size(c.out_dtype)),
          inputs_(pairs, data.x), outputs_(pairs, std::vector<unsigned char>(out_bytes_ + 64)) {}

    std::size_t pairs() const { return inputs_.size(); }
    ConstTensorView x(std::size_t i) const { return {inputs_[i].data(), in_dtype_, shape_}; }
    TensorView out(std::size_t i) {
        void *out = outputs_[i].data();
        std::size_t space = outputs_[i].size();
        return {std::align(64, out_bytes_, out, space), out_dtype_, shape_};
    }

private:
    DType in_dtype_, out_dtype_;
    std::vector<std::int64_t> shape_;
    std::size_t out_bytes_;
    std::vector<std::vector<unsigned char>> inputs_, outputs_;
};

CaseResult run_case(const DemoCase &c, std::uint64_t seed, measure::MemcpyCeilingBySize &copy) {
    const DemoData data = make_demo_data(c, seed);
    NormConfig config;
    config.dim = c.shape.back();
    config.eps = c.eps;
    config.num_modality = c.num_modality;
    config.out_dtype = c.out_dtype;
    const RMSNorm norm(config, data.weight_view(c));
    const Grouping grouping = data.grouping(c);

    // The timed calls rotate through as much memory as the copy does, so that both stream from
    // DRAM: the model's tensors are larger than the caches, and a small case timed on one buffer
    // pair was timed cache-hot against a copy from DRAM (1.5-2.8 of the copy at 64 tokens).
    CaseResult r{&c, 0, traffic_bytes(c, norm), 0, {}};
    CallBuffers buffers(c, data, std::max<std::size_t>(1, measure::kDramFootprint / r.bytes));
    const auto round = [&] {
        for (std::size_t i = 0; i < buffers.pairs(); ++i) norm.forward(buffers.x(i), grouping, buffers.out(i));
    };
    r.seconds = measure::time_runs(kRepeats, round).best_seconds / static_cast<double>(buffers.pairs());
    r.variant = last_variant();
    r.check = check_sampled_rows(c, data, buffers.out(0).data, kSampleTokens);
    r.copy_gbps = copy.gbps(r.bytes, kRepeats);
    return r;
}

}  // namespace

int run_demo(const std::vector<std::string> &args) {
    const ParsedArgs parsed = parse_args(args, {"--tokens", "--threads"}, {"--json"});
    if (!parsed.positional.empty()) throw UsageError("demo takes no file arguments");
    const std::int64_t tokens = int_flag(parsed, "--tokens", 1).value_or(kDefaultTokens);
    apply_threads_flag(parsed);
    const bool json = parsed.switches.count("--json") != 0;
    // The copy runs on as many threads as the norm; the runtime reports 0 if it has not decided.
    int threads = num_threads();
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

    if (!json) print_table_header(tokens, threads);
    measure::MemcpyCeilingBySize copy(threads);
    bool all_pass = true;
    std::uint64_t seed = 1;
    for (const DemoCase &c : model_cases(tokens)) {
        const CaseResult r = run_case(c, seed++, copy);
        all_pass = all_pass && r.check.pass;
        if (json) {
            print_json_line(r, threads);
        } else {
            print_table_row(r);
        }
    }
    return all_pass ? 0 : 1;
}

}  // namespace magi2norm::cli
