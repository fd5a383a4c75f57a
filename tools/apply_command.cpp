// Reads x, weight and the grouping from IN, the norm's parameters from IN's __metadata__
// (overridden by flags), and writes y (in the output dtype) and y_f32 (the pre-cast result) to
// OUT. Golden files have exactly this layout, so `apply` on one reproduces its y and y_f32.
#include "apply_command.hpp"

#include "cli_args.hpp"
#include "norm_parameters.hpp"
#include "magi2norm/magi2norm.hpp"
#include "magi2norm/safetensors.hpp"
#include "output_file.hpp"

namespace magi2norm::cli {

int run_apply(const std::vector<std::string> &args) {
    const FileCommand command = parse_file_command(args, "apply", {});
    const ParsedArgs &parsed = command.args;
    const std::string &in_path = command.in_path, &out_path = command.out_path;

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
    write_output_file(out_path, {{"y", safetensors::dtype_tag(out_dtype), shape, y.data()}, {"y_f32", "F32", shape, y_f32.data()}},
                      parameters.metadata);
    return 0;
}

}  // namespace magi2norm::cli
