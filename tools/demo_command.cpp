// For each norm of the model: synthetic data, the best forward time, a sampled check against a
// scalar reference, and the memcpy bandwidth for the same traffic as the yardstick.
#include "demo_command.hpp"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "best_time.hpp"
#include "cli_args.hpp"
#include "copy_bandwidth.hpp"
#include "demo_cases.hpp"
#include "demo_report.hpp"
#include "magi2norm/magi2norm.hpp"
#include "row_check.hpp"

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

CaseResult run_case(const DemoCase &c, std::uint64_t seed, CopyBandwidth &copy) {
    const DemoData data = make_demo_data(c, seed);
    NormConfig config;
    config.dim = c.shape.back();
    config.eps = c.eps;
    config.num_modality = c.num_modality;
    config.out_dtype = c.out_dtype;
    const RMSNorm norm(config, data.weight_view(c));

    // Output memory aligned to a cache line, as a tensor allocator gives it (PyTorch's CPU
    // allocator: 64 bytes), so that large outputs take the streaming-store variants.
    const std::size_t out_bytes = static_cast<std::size_t>(element_count(c.shape)) * dtype_size(c.out_dtype);
    std::vector<unsigned char> out_memory(out_bytes + 64);
    void *out = out_memory.data();
    std::size_t space = out_memory.size();
    std::align(64, out_bytes, out, space);
    const ConstTensorView x = data.x_view(c);
    const Grouping grouping = data.grouping(c);
    const TensorView out_view(out, c.out_dtype, c.shape);

    CaseResult r{&c, 0, traffic_bytes(c, norm), 0, {}};
    r.seconds = best_seconds(kRepeats, [&] { norm.forward(x, grouping, out_view); });
    r.variant = last_variant();
    r.check = check_sampled_rows(c, data, out, kSampleTokens);
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
    CopyBandwidth copy(threads);
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
