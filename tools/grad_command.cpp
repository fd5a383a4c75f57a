// Reads x, dy, weight and the grouping from IN, the norm's parameters as `apply` does plus
// dx_dtype (flag --dx-dtype, else IN's metadata, else x's dtype), and writes dx (in dx_dtype),
// dweight (in the weight's dtype), dx_f32 and dscale_f32 (the FP32 results before their casts)
// to OUT. Golden gradient files carry x, dy, weight and these parameters.
#include "grad_command.hpp"

#include "cli_args.hpp"
#include "magi2norm/magi2norm.hpp"
#include "magi2norm/safetensors.hpp"
#include "norm_parameters.hpp"
#include "output_file.hpp"

namespace magi2norm::cli {

int run_grad(const std::vector<std::string> &args) {
    const FileCommand command = parse_file_command(args, "grad", {"--dx-dtype"});
    const ParsedArgs &parsed = command.args;
    const std::string &in_path = command.in_path, &out_path = command.out_path;

    const safetensors::File in = safetensors::File::open(in_path);
    const ConstTensorView x = in.view("x"), dy = in.view("dy"), weight = in.view("weight");
    if (x.shape.empty()) throw Error(ErrorCode::shape, in_path + ": x is a scalar; it needs at least one axis (the normalized one)");
    Parameters parameters = merge_parameters(parsed, in.metadata());
    if (const auto flag = parsed.values.find("--dx-dtype"); flag != parsed.values.end()) {
        parameters.metadata["dx_dtype"] = flag->second;
        parameters.from_flag["dx_dtype"] = "--dx-dtype";
    }
    const NormConfig config = read_config(parameters, in_path, x);
    DType dx_dtype = x.dtype;
    if (const auto text = parameters.text("dx_dtype")) {
        const auto parsed_dtype = parse_dtype(*text);
        if (!parsed_dtype) bad_parameter(parameters, in_path, "dx_dtype", "f32, bf16 or f16");
        dx_dtype = *parsed_dtype;
    }
    const RMSNorm norm(config, weight);
    const Grouping grouping = read_grouping(in);

    const std::size_t x_count = static_cast<std::size_t>(element_count(x.shape));
    const std::size_t w_count = static_cast<std::size_t>(element_count(weight.shape));
    std::vector<float> dx_f32(x_count), dscale_f32(w_count);
    std::vector<unsigned char> dx(x_count * dtype_size(dx_dtype)), dweight(w_count * dtype_size(weight.dtype));
    BackwardOptions options;
    options.dx_dtype = DType::f32;
    norm.backward(x, dy, grouping, TensorView(dx_f32.data(), DType::f32, x.shape), TensorView(dscale_f32.data(), DType::f32, weight.shape),
                  options);
    options.dx_dtype = dx_dtype;
    norm.backward(x, dy, grouping, TensorView(dx.data(), dx_dtype, x.shape), TensorView(dweight.data(), weight.dtype, weight.shape),
                  options);

    record_parameters(parameters.metadata, config, norm.output_dtype(x.dtype));
    parameters.metadata["dx_dtype"] = dtype_name(dx_dtype);
    write_output_file(out_path,
                      {{"dx", safetensors::dtype_tag(dx_dtype), x.shape, dx.data()},
                       {"dweight", safetensors::dtype_tag(weight.dtype), weight.shape, dweight.data()},
                       {"dx_f32", "F32", x.shape, dx_f32.data()},
                       {"dscale_f32", "F32", weight.shape, dscale_f32.data()}},
                      parameters.metadata);
    return 0;
}

}  // namespace magi2norm::cli
