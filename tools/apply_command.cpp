// Reads x, weight and the grouping from IN, the norm's parameters from IN's __metadata__
// (overridden by flags), and writes y (in the output dtype) and y_f32 (the pre-cast result) to
// OUT. Golden files have exactly this layout, so `apply` on one reproduces its y and y_f32.
#include "apply_command.hpp"

#include <charconv>
#include <filesystem>

#include "cli_args.hpp"
#include "magi2norm/magi2norm.hpp"
#include "magi2norm/safetensors.hpp"
#include "output_file.hpp"

namespace magi2norm::cli {
namespace {

// The parameters OUT records: those the run used, in canonical form (eps as the shortest text
// that reads back as the same FP32), whether they came from flags, IN's metadata or defaults.
void record_parameters(std::map<std::string, std::string> &metadata, const NormConfig &config, DType out_dtype) {
    char eps[32];
    const auto written = std::to_chars(eps, eps + sizeof eps, config.eps);
    metadata["dim"] = std::to_string(config.dim);
    metadata["eps"] = std::string(eps, written.ptr);
    metadata["num_modality"] = std::to_string(config.num_modality);
    metadata["num_patterns"] = std::to_string(config.num_patterns);
    metadata["out_dtype"] = dtype_name(out_dtype);
}

// Flag name -> metadata key of each norm parameter.
const std::map<std::string, std::string> kParameterFlags = {
    {"--dim", "dim"},
    {"--eps", "eps"},
    {"--num-modality", "num_modality"},
    {"--num-patterns", "num_patterns"},
    {"--out-dtype", "out_dtype"},
};

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

// A bad value is a usage error when it came from a flag and a format error when from the file.
[[noreturn]] void bad_parameter(const Parameters &p, const std::string &path, const std::string &key,
                                const std::string &expected) {
    const std::string value = *p.text(key);
    const auto flag = p.from_flag.find(key);
    if (flag != p.from_flag.end()) throw UsageError(flag->second + " needs " + expected + ", got '" + value + "'");
    throw Error(ErrorCode::format, path + ": __metadata__ " + key + " needs " + expected + ", got '" + value + "'");
}

std::int64_t int_parameter(const Parameters &p, const std::string &path, const std::string &key, std::int64_t fallback) {
    const auto text = p.text(key);
    if (!text) return fallback;
    const auto value = parse_int(*text);
    if (!value) bad_parameter(p, path, key, integer_expected(*text));
    return *value;
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

// Per-token ids from `modality`, or group sizes from `group_sizes`; ids point into the file.
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

}  // namespace

int run_apply(const std::vector<std::string> &args) {
    std::set<std::string> valued{"--threads"};
    for (const auto &entry : kParameterFlags) valued.insert(entry.first);
    const ParsedArgs parsed = parse_args(args, valued);
    if (parsed.positional.size() != 2) throw UsageError("apply needs IN.safetensors and OUT.safetensors");
    const std::string &in_path = parsed.positional[0], &out_path = parsed.positional[1];
    apply_threads_flag(parsed);
    // OUT replaces its file at the end, so OUT = IN would leave nothing but y and y_f32. The same
    // file is the same device and inode, whatever the spelling: symlinks, "..", hard links.
    std::error_code error;
    if (std::filesystem::equivalent(in_path, out_path, error)) {
        throw UsageError("OUT is the same file as IN, which it would replace; choose another OUT");
    }

    const safetensors::File in = safetensors::File::open(in_path);
    const ConstTensorView x = in.view("x");
    if (x.shape.empty()) throw Error(ErrorCode::shape, in_path + ": x is a scalar; it needs at least one axis (the normalized one)");
    Parameters parameters = merge_parameters(parsed, in.metadata());
    const NormConfig config = read_config(parameters, in_path, x);
    const RMSNorm norm(config, in.view("weight"));
    const Grouping grouping = read_grouping(in);

    const std::vector<std::int64_t> shape = norm.output_shape(x.shape);
    const std::size_t count = static_cast<std::size_t>(element_count(shape));
    const DType out_dtype = norm.output_dtype(x.dtype);
    std::vector<float> y_f32(count);
    std::vector<unsigned char> y(count * dtype_size(out_dtype));
    norm.forward(x, grouping, TensorView(y_f32.data(), DType::f32, shape), DType::f32);
    norm.forward(x, grouping, TensorView(y.data(), out_dtype, shape), out_dtype);

    record_parameters(parameters.metadata, config, out_dtype);
    const safetensors::Encoded encoded = safetensors::encode(out_path,
        {{"y", safetensors::dtype_tag(out_dtype), shape, y.data()}, {"y_f32", "F32", shape, y_f32.data()}},
        parameters.metadata);
    OutputFile out(out_path);
    out.write(encoded.head.data(), encoded.head.size());
    for (const auto &[data, size] : encoded.data) out.write(data, size);
    out.commit();
    return 0;
}

}  // namespace magi2norm::cli
