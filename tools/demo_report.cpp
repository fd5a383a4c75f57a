#include "demo_report.hpp"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace magi2norm::cli {
namespace {

std::string shape_text(const std::vector<std::int64_t> &shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
}

double gbps(const CaseResult &r) { return static_cast<double>(r.bytes) / r.seconds / 1e9; }

}  // namespace

void print_table_header(std::int64_t tokens, int threads) {
    std::printf("magi2-norm demo: MAGI-2 Preview norms, T = %lld tokens, %d threads\n",
                static_cast<long long>(tokens), threads);
    std::printf("%-27s %-16s %-4s %-4s %2s %-8s %9s %8s %9s %7s  %s\n", "name", "shape", "in", "out", "M",
                "grouping", "time(ms)", "GB/s", "copy GB/s", "of copy", "check (max abs err), variant");
}

void print_table_row(const CaseResult &r) {
    const DemoCase &c = *r.demo_case;
    std::printf("%-27s %-16s %-4s %-4s %2lld %-8s %9.3f %8.2f %9.2f %7.2f  %s (%.3g), %s\n", c.name.c_str(),
                shape_text(c.shape).c_str(), dtype_name(c.in_dtype), dtype_name(c.out_dtype),
                static_cast<long long>(c.num_modality), grouping_name(c.grouping), r.seconds * 1e3, gbps(r),
                r.copy_gbps, gbps(r) / r.copy_gbps, r.check.pass ? "pass" : "FAIL", r.check.max_abs_err, r.variant.c_str());
    std::fflush(stdout);
}

void print_json_line(const CaseResult &r, int threads) {
    const DemoCase &c = *r.demo_case;
    const nlohmann::ordered_json line = {
        {"name", c.name},
        {"shape", c.shape},
        {"in_dtype", dtype_name(c.in_dtype)},
        {"out_dtype", dtype_name(c.out_dtype)},
        {"num_modality", c.num_modality},
        {"grouping", grouping_name(c.grouping)},
        {"tokens", c.shape.front()},
        {"threads", threads},
        {"seconds", r.seconds},
        {"bytes", r.bytes},
        {"gbps", gbps(r)},
        {"copy_gbps", r.copy_gbps},
        {"fraction_of_copy", gbps(r) / r.copy_gbps},
        {"max_abs_err", r.check.max_abs_err},
        {"check", r.check.pass ? "pass" : "fail"},
        {"variant", r.variant},
    };
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
}

}  // namespace magi2norm::cli
