#include "cli_args.hpp"

#include <charconv>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::cli {

// Halide's thread pool, which runs the library's CPU calls, has at most this many threads.
constexpr std::int64_t kMaxThreads = 256;

ParsedArgs parse_args(const std::vector<std::string> &args, const std::set<std::string> &valued,
                      const std::set<std::string> &switches) {
    ParsedArgs parsed;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string &arg = args[i];
        if (arg.size() < 2 || arg[0] != '-') {
            parsed.positional.push_back(arg);
            continue;
        }
        if (arg.rfind("--", 0) != 0) throw UsageError("unknown option " + arg);
        const std::size_t equals = arg.find('=');
        const std::string flag = arg.substr(0, equals);
        if (switches.count(flag) != 0 && equals == std::string::npos) {
            parsed.switches.insert(flag);
        } else if (valued.count(flag) != 0) {
            if (equals != std::string::npos) {
                parsed.values[flag] = arg.substr(equals + 1);
            } else if (i + 1 < args.size()) {
                parsed.values[flag] = args[++i];
            } else {
                throw UsageError(flag + " needs a value");
            }
        } else {
            throw UsageError("unknown option " + arg);
        }
    }
    return parsed;
}

namespace {
template <typename T>
std::optional<T> parse_number(std::string_view text, bool *out_of_range = nullptr) {
    T value{};
    const char *end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (out_of_range) *out_of_range = !text.empty() && ec == std::errc::result_out_of_range && ptr == end;
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return value;
}
}  // namespace

std::optional<std::int64_t> parse_int(std::string_view text) { return parse_number<std::int64_t>(text); }
std::optional<float> parse_float(std::string_view text) { return parse_number<float>(text); }

std::string integer_expected(std::string_view text) {
    bool out_of_range = false;
    parse_number<std::int64_t>(text, &out_of_range);
    return out_of_range ? "an integer within int64" : "an integer";
}

std::string number_expected(std::string_view text) {
    bool out_of_range = false;
    parse_number<float>(text, &out_of_range);
    return out_of_range ? "a number within FP32's range (magnitude 1.4e-45 to 3.4e38, or 0)" : "a number";
}

std::optional<std::int64_t> int_flag(const ParsedArgs &args, const std::string &flag, std::int64_t min,
                                     std::int64_t max) {
    const auto it = args.values.find(flag);
    if (it == args.values.end()) return std::nullopt;
    const auto value = parse_int(it->second);
    if (!value || *value < min || *value > max) {
        const std::string range = max == INT64_MAX ? ">= " + std::to_string(min)
                                                   : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
        throw UsageError(flag + " needs " + integer_expected(it->second) + " " + range + ", got '" + it->second + "'");
    }
    return value;
}

void apply_threads_flag(const ParsedArgs &args) {
    if (const auto threads = int_flag(args, "--threads", 1, kMaxThreads)) set_num_threads(static_cast<int>(*threads));
}

}  // namespace magi2norm::cli
