// The norm's parameters of the safetensors commands (apply, grad): from IN's __metadata__,
// overridden by flags, recorded in OUT in canonical form; and the grouping IN holds.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "magi2norm/magi2norm.hpp"
#include "magi2norm/safetensors.hpp"

namespace magi2norm::cli {

// Flag name -> metadata key of each norm parameter.
extern const std::map<std::string, std::string> kParameterFlags;

// A parameter's text: the flag when given, else the file's metadata, else nullopt.
struct Parameters {
    std::map<std::string, std::string> metadata;
    std::map<std::string, std::string> from_flag;  // key -> the flag that set it

    std::optional<std::string> text(const std::string &key) const {
        const auto it = metadata.find(key);
        if (it == metadata.end()) return std::nullopt;
        return it->second;
    }
};


// IN's metadata with the flags of kParameterFlags in `args` laid over it.
Parameters merge_parameters(const ParsedArgs &args, const std::map<std::string, std::string> &file_metadata);
// A bad value is a usage error when it came from a flag and a format error when from the file.
[[noreturn]] void bad_parameter(const Parameters &p, const std::string &path, const std::string &key,
                                const std::string &expected);
// The norm's configuration for input `x` (dim defaults to x's last axis).
NormConfig read_config(const Parameters &p, const std::string &path, const ConstTensorView &x);
// The parameters OUT records: those the run used, in canonical form (eps as the shortest text
// that reads back as the same FP32), whether they came from flags, IN's metadata or defaults.
void record_parameters(std::map<std::string, std::string> &metadata, const NormConfig &config, DType out_dtype);
// Per-token ids from `modality`, or group sizes from `group_sizes`; ids point into the file.
Grouping read_grouping(const safetensors::File &file);
// The command line of a command on IN.safetensors OUT.safetensors: the flags of kParameterFlags,
// --threads (applied here) and `valued`; two positionals, OUT not IN's file (OUT replaces its
// file at the end, so OUT = IN would leave nothing but the results).
struct FileCommand {
    ParsedArgs args;
    std::string in_path, out_path;
};
FileCommand parse_file_command(const std::vector<std::string> &args, const std::string &command, std::set<std::string> valued);

}  // namespace magi2norm::cli
