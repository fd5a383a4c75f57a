// Command-line parsing shared by the subcommands: flags with values, switches, positionals.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace magi2norm::cli {

// A malformed command line: main reports it and exits with status 2 (any other error gives 1).
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct ParsedArgs {
    std::vector<std::string> positional;
    std::map<std::string, std::string> values;  // "--flag" -> its value
    std::set<std::string> switches;             // "--flag" given without a value
};

// Accepts "--flag value" and "--flag=value" for the flags in `valued`, and the bare flags in
// `switches`; anything else starting with "-" (but "-" itself) is a UsageError.
ParsedArgs parse_args(const std::vector<std::string> &args, const std::set<std::string> &valued,
                      const std::set<std::string> &switches = {});

// The whole text as a number, or nullopt (empty, trailing characters, out of range).
std::optional<std::int64_t> parse_int(std::string_view text);
std::optional<float> parse_float(std::string_view text);
// What a value that did not parse needed, for the message: "an integer" / "a number", or, for a
// number too large or too small for its type, "an integer within int64" / "a number within
// FP32's range (magnitude 1.4e-45 to 3.4e38, or 0)".
std::string integer_expected(std::string_view text);
std::string number_expected(std::string_view text);

// An integer flag in [min, max], nullopt when absent; a UsageError when malformed.
std::optional<std::int64_t> int_flag(const ParsedArgs &args, const std::string &flag, std::int64_t min,
                                     std::int64_t max = INT64_MAX);

// Applies --threads N (1 <= N <= 256, the most the library's pool runs) when given.
void apply_threads_flag(const ParsedArgs &args);

}  // namespace magi2norm::cli
