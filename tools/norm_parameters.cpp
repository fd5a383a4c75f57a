#include "norm_parameters.hpp"

#include <charconv>
#include <filesystem>

namespace magi2norm::cli {

namespace {

std::int64_t int_parameter(const Parameters &p, const std::string &path, const std::string &key, std::int64_t fallback) {
    const auto text = p.text(key);
    if (!text) return fallback;
    const auto value = parse_int(*text);
    if (!value) bad_parameter(p, path, key, integer_expected(*text));
    return *value;
}

}  // namespace

const std::map<std::string, std::string> kParameterFlags = {
    {"--dim", "dim"},
    {"--eps", "eps"},
    {"--num-modality", "num_modality"},
    {"--num-patterns", "num_patterns"},
    {"--out-dtype", "out_dtype"},
};

void record_parameters(std::map<std::string, std::string> &metadata, const NormConfig &config, DType out_dtype) {
    char eps[32];
    const auto written = std::to_chars(eps, eps + sizeof eps, config.eps);
    metadata["dim"] = std::to_string(config.dim);
    metadata["eps"] = std::string(eps, written.ptr);
    metadata["num_modality"] = std::to_string(config.num_modality);
    metadata["num_patterns"] = std::to_string(config.num_patterns);
    metadata["out_dtype"] = dtype_name(out_dtype);
}

Parameters merge_parameters(const ParsedArgs &args, const std::map<std::string, std::string> &file_metadata) {
    Parameters p{file_metadata, {}};
    for (const auto &[flag, key] : kParameterFlags) {
        const auto it = args.values.find(flag);
        if (it == args.values.end()) continue;
        p.metadata[key] = it->second;
        p.from_flag[key] = flag;
    }
    return p;
}

[[noreturn]] void bad_parameter(const Parameters &p, const std::string &path, const std::string &key,
                                const std::string &expected) {
    const std::string value = *p.text(key);
    const auto flag = p.from_flag.find(key);
    if (flag != p.from_flag.end()) throw UsageError(flag->second + " needs " + expected + ", got '" + value + "'");
    throw Error(ErrorCode::format, path + ": __metadata__ " + key + " needs " + expected + ", got '" + value + "'");
}

NormConfig read_config(const Parameters &p, const std::string &path, const ConstTensorView &x) {
    NormConfig config;
    // Without a dim, the normalized axis is the last one, as it must be anyway.
    config.dim = int_parameter(p, path, "dim", x.shape.empty() ? 0 : x.shape.back());
    config.num_modality = int_parameter(p, path, "num_modality", 1);
    config.num_patterns = int_parameter(p, path, "num_patterns", 1);
    if (const auto eps = p.text("eps")) {
        const auto value = parse_float(*eps);
        if (!value) bad_parameter(p, path, "eps", number_expected(*eps));
        config.eps = *value;
    }
    // A file may say "none" (no output dtype of its own: the input's); a flag must name one.
    if (const auto out = p.text("out_dtype"); out && (p.from_flag.count("out_dtype") != 0 || *out != "none")) {
        config.out_dtype = parse_dtype(*out);
        if (!config.out_dtype) bad_parameter(p, path, "out_dtype", "f32, bf16 or f16");
    }
    return config;
}

Grouping read_grouping(const safetensors::File &file) {
    const bool has_ids = file.contains("modality"), has_sizes = file.contains("group_sizes");
    if (has_ids && has_sizes) {
        throw Error(ErrorCode::grouping, file.path() + ": both modality and group_sizes are present");
    }
    if (has_ids) {
        const safetensors::TensorInfo &t = file.tensor("modality");
        if (t.dtype != "I32" || t.shape.size() != 1) {
            throw Error(ErrorCode::grouping, file.path() + ": modality must be a 1-D I32 tensor");
        }
        return Grouping::ids(static_cast<const std::int32_t *>(t.data), t.shape[0]);
    }
    if (has_sizes) {
        const safetensors::TensorInfo &t = file.tensor("group_sizes");
        if ((t.dtype != "I32" && t.dtype != "I64") || t.shape.size() != 1) {
            throw Error(ErrorCode::grouping, file.path() + ": group_sizes must be a 1-D I32 or I64 tensor");
        }
        std::vector<std::int64_t> sizes(static_cast<std::size_t>(t.shape[0]));
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            if (t.dtype == "I32") {
                sizes[i] = static_cast<const std::int32_t *>(t.data)[i];
            } else {
                sizes[i] = static_cast<const std::int64_t *>(t.data)[i];
            }
        }
        return Grouping::sizes(std::move(sizes));
    }
    return Grouping::none();
}

FileCommand parse_file_command(const std::vector<std::string> &args, const std::string &command, std::set<std::string> valued) {
    valued.insert("--threads");
    for (const auto &entry : kParameterFlags) valued.insert(entry.first);
    FileCommand c{parse_args(args, valued), {}, {}};
    if (c.args.positional.size() != 2) throw UsageError(command + " needs IN.safetensors and OUT.safetensors");
    c.in_path = c.args.positional[0];
    c.out_path = c.args.positional[1];
    apply_threads_flag(c.args);
    std::error_code error;
    if (std::filesystem::equivalent(c.in_path, c.out_path, error)) {
        throw UsageError("OUT is the same file as IN, which it would replace; choose another OUT");
    }
    return c;
}

}  // namespace magi2norm::cli
