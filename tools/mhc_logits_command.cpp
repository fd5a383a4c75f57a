// Reads x ([T, D] or [T, S, C]), weight, phi ([D, N] F32) and the grouping from IN, the norm's
// parameters from IN's __metadata__ (overridden by flags; dim defaults to x's row, S*C), and
// writes `logits` ([T, N] F32) and `inverse_rms` ([T] F32) to OUT, whole or not at all.
#include "mhc_logits_command.hpp"

#include <algorithm>

#include "cli_args.hpp"
#include "magi2norm/magi2norm.hpp"
#include "magi2norm/safetensors.hpp"
#include "norm_parameters.hpp"
#include "output_file.hpp"

namespace magi2norm::cli {

int run_mhc_logits(const std::vector<std::string> &args) {
    const FileCommand command = parse_file_command(args, "mhc-logits", {});
    const safetensors::File in = safetensors::File::open(command.in_path);
    const ConstTensorView x = in.view("x");
    if (x.shape.size() != 2 && x.shape.size() != 3) {
        throw Error(ErrorCode::shape, command.in_path + ": x must be [T, D] or [T, S, C]");
    }
    // The norm's row: D, or S * C of [T, S, C] (read_config takes x's last axis).
    std::vector<std::int64_t> rows_shape = {x.shape[0], element_count(x.shape) / std::max<std::int64_t>(x.shape[0], 1)};
    if (x.shape[0] == 0) rows_shape[1] = x.shape.size() == 3 ? x.shape[1] * x.shape[2] : x.shape[1];
    Parameters parameters = merge_parameters(command.args, in.metadata());
    const NormConfig config = read_config(parameters, command.in_path, ConstTensorView(x.data, x.dtype, rows_shape));
    const RMSNorm norm(config, in.view("weight"));
    const ConstTensorView phi = in.view("phi");
    const std::int64_t tokens = x.shape[0], columns = phi.shape.size() == 2 ? phi.shape[1] : 0;
    std::vector<float> logits(static_cast<std::size_t>(tokens * columns)), inverse_rms(static_cast<std::size_t>(tokens));
    MhcLogitsOptions options;
    options.inverse_rms = TensorView(inverse_rms.data(), DType::f32, {tokens});
    norm.mhc_logits(x, read_grouping(in), phi, TensorView(logits.data(), DType::f32, {tokens, columns}), options);

    record_parameters(parameters.metadata, config, DType::f32);
    write_output_file(command.out_path,
                      {{"logits", "F32", {tokens, columns}, logits.data()}, {"inverse_rms", "F32", {tokens}, inverse_rms.data()}},
                      parameters.metadata);
    return 0;
}

}  // namespace magi2norm::cli
