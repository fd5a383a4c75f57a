#include "backward_case.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

#include "reference/gates.hpp"
#include "reference/reference.hpp"
#include "reference/safetensors_file.hpp"

namespace backward_test {

namespace {

// float32(W(w + 1)): the +1 rounded in the weight's dtype (SPEC.md), with the tests' own codecs.
double scale_of(DType weight_dtype, float w) {
    const float plus = w + 1.0f;
    if (weight_dtype == DType::bf16) return ref::bf16_to_f32(ref::f32_to_bf16(plus));
    if (weight_dtype == DType::f16) return ref::f16_to_f32(ref::f32_to_f16(plus));
    return plus;
}

std::vector<double> values(const ref::HostTensor &t) {
    std::vector<double> v(static_cast<std::size_t>(t.size()));
    for (std::int64_t i = 0; i < t.size(); ++i) v[i] = t.get(i);
    return v;
}

bool same_special(double a, double b) { return (std::isnan(a) && std::isnan(b)) || (std::isinf(b) && a == b); }

}  // namespace

magi2norm::Grouping Inputs::library_grouping() const {
    if (grouping == GroupingKind::sizes) return magi2norm::Grouping::sizes(sizes);
    if (grouping == GroupingKind::ids) return magi2norm::Grouping::ids(ids.data(), static_cast<std::int64_t>(ids.size()));
    return magi2norm::Grouping::none();
}

Problem Inputs::problem() const {
    return make_problem(config, weight, x.view(), dy.view(), grouping == GroupingKind::none ? std::vector<std::int32_t>{} : ids);
}

Problem make_problem(const magi2norm::NormConfig &config, const ref::HostTensor &weight, const magi2norm::ConstTensorView &x,
                     const magi2norm::ConstTensorView &dy, const std::vector<std::int32_t> &ids) {
    Problem p;
    p.dim = config.dim;
    p.num_modality = config.num_modality;
    p.num_patterns = config.num_patterns;
    p.eps = config.eps;
    p.x_shape = x.shape;
    p.x = values(ref::HostTensor::copy_of(x));
    p.dy = values(ref::HostTensor::copy_of(dy));
    for (std::int64_t i = 0; i < weight.size(); ++i) p.scale.push_back(scale_of(weight.dtype(), weight.get(i)));
    p.ids = ids;
    return p;
}

Inputs make_inputs(DType x_dtype, DType dy_dtype, DType weight_dtype, const ref::Shape &shape, std::int64_t num_modality,
                   std::int64_t num_patterns, GroupingKind grouping, std::uint64_t seed) {
    contract::Rng rng(seed);
    Inputs in;
    in.config.dim = shape.back();
    in.config.num_modality = num_modality;
    in.config.num_patterns = num_patterns;
    in.x = ref::HostTensor(x_dtype, shape);
    const std::int64_t row = shape.back();
    for (std::int64_t start = 0; start < in.x.size(); start += row) {
        const int exponent = static_cast<int>(rng.integer(-3, 3));
        for (std::int64_t d = 0; d < row; ++d) in.x.set(start + d, static_cast<float>(std::ldexp(rng.uniform(-1.0, 1.0), exponent)));
    }
    Problem shape_only;
    shape_only.x_shape = shape;
    shape_only.num_patterns = num_patterns;
    in.dy = ref::HostTensor(dy_dtype, output_shape(shape_only));
    for (std::int64_t i = 0; i < in.dy.size(); ++i) in.dy.set(i, static_cast<float>(rng.uniform(-1.0, 1.0)));
    in.weight = contract::random_weight(weight_dtype, {num_modality * num_patterns * in.config.dim}, rng);
    in.grouping = grouping;
    const std::int64_t tokens = shape[0];
    if (grouping == GroupingKind::sizes) {
        in.sizes = num_modality > 1 ? contract::random_sizes_with_empty(tokens, num_modality, 1, rng)
                                    : std::vector<std::int64_t>{tokens};
        for (std::size_t m = 0; m < in.sizes.size(); ++m) in.ids.insert(in.ids.end(), in.sizes[m], static_cast<std::int32_t>(m));
    } else if (grouping == GroupingKind::ids) {
        in.ids = contract::random_ids(tokens, num_modality, rng);
    }
    return in;
}

Result run_backward(const Inputs &in, DType dx_dtype, DType dweight_dtype, const magi2norm::BackwardOptions &options) {
    const magi2norm::RMSNorm norm(in.config, in.weight.view());
    Result r{ref::HostTensor(dx_dtype, in.x.shape()), ref::HostTensor(dweight_dtype, in.weight.shape())};
    magi2norm::BackwardOptions o = options;
    o.dx_dtype = dx_dtype;
    norm.backward(in.x.view(), in.dy.view(), in.library_grouping(), r.dx.view(), r.dweight.view(), o);
    return r;
}

ref::HostTensor run_forward(const Inputs &in, magi2norm::Backend backend, DType out_dtype, ref::HostTensor *inverse_rms) {
    const magi2norm::RMSNorm norm(in.config, in.weight.view());
    ref::HostTensor out(out_dtype, norm.output_shape(in.x.shape()));
    magi2norm::CallOptions options;
    options.out_dtype = out_dtype;
    options.stream.backend = backend;
    if (inverse_rms) {
        ref::Shape rows = out.shape();
        rows.pop_back();
        *inverse_rms = ref::HostTensor(DType::f32, rows);
        options.inverse_rms = inverse_rms->view();
    }
    norm.forward(in.x.view(), in.library_grouping(), out.view(), options);
    return out;
}

namespace {

// Output index -> the x element it normalizes (broadcast axes read index 0).
std::int64_t x_offset(const ref::HostTensor &x, const ref::Shape &out_index) {
    const ref::Shape &shape = x.shape();
    const std::size_t shift = out_index.size() - shape.size();
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) offset = offset * shape[i] + (shape[i] == 1 ? 0 : out_index[i + shift]);
    return offset;
}

}  // namespace

void expect_inverse_rms_of_output(const Inputs &in, const ref::HostTensor &out32, const ref::HostTensor &inverse_rms) {
    const std::vector<float> scale = ref::scale_of(in.weight.view());
    const std::int64_t dim = in.config.dim, patterns = in.config.num_patterns;
    std::int64_t flat = 0, mismatches = 0;
    ref::for_each_index(out32.shape(), [&](const ref::Shape &index) {
        const std::int64_t row = flat / dim, d = index.back();
        const std::int64_t p = patterns > 1 ? index[index.size() - 2] : 0;
        const std::int64_t m = in.ids.empty() ? 0 : in.ids[static_cast<std::size_t>(index[0])];
        const float inv = inverse_rms.get(row);
        const float expected = (in.x.get(x_offset(in.x, index)) * inv) * scale[static_cast<std::size_t>((m * patterns + p) * dim + d)];
        const float actual = out32.get(flat);
        if (std::memcmp(&expected, &actual, sizeof expected) != 0 && !(std::isnan(expected) && std::isnan(actual))) ++mismatches;
        if (d == 0) {
            double sum = 0;
            for (std::int64_t k = 0; k < dim; ++k) {
                ref::Shape at = index;
                at.back() = k;
                const double v = in.x.get(x_offset(in.x, at));
                sum += v * v;
            }
            const float oracle = 1.0f / std::sqrt(static_cast<float>(sum) / static_cast<float>(dim) + in.config.eps);
            EXPECT_LE(std::fabs(inv - oracle), 1e-6f * oracle) << "row " << row;
        }
        ++flat;
    });
    EXPECT_EQ(mismatches, 0) << "FP32 outputs that are not (x * inv) * scale with the returned inv";
}

Inputs golden_inputs(const ref::SafetensorsFile &file) {
    const auto &meta = file.metadata();
    Inputs in;
    in.config.dim = std::stoll(meta.at("dim"));
    in.config.eps = std::stof(meta.at("eps"));
    in.config.num_modality = std::stoll(meta.at("num_modality"));
    in.config.num_patterns = std::stoll(meta.at("num_patterns"));
    in.x = file.tensor("x");
    in.dy = file.tensor("dy");
    in.weight = file.tensor("weight");
    const std::string grouping = meta.at("grouping");
    if (grouping == "sizes") {
        in.grouping = GroupingKind::sizes;
        for (std::int32_t s : file.int32s("group_sizes")) in.sizes.push_back(s);
    } else if (grouping == "ids") {
        in.grouping = GroupingKind::ids;
        in.ids = file.int32s("modality");
    }
    return in;
}

void expect_b1_b2_b3(const Inputs &in, DType dx_dtype, const magi2norm::BackwardOptions &options) {
    const Gradients o = oracle(in.problem());
    const Result f32 = run_backward(in, DType::f32, DType::f32, options);
    EXPECT_TRUE(b1_close(f32.dx, o.dx));
    EXPECT_TRUE(b2_close(f32.dweight, o.dscale, o.dscale_bound));
    const Result low = run_backward(in, dx_dtype, DType::bf16, options);
    if (dx_dtype != DType::f32) {
        EXPECT_TRUE(b3_one_ulp(low.dx, f32.dx, o.dx, o.dx_terms));
    } else {
        EXPECT_TRUE(ref::identical(low.dx.view(), f32.dx.view()));
    }
    EXPECT_TRUE(b3_one_ulp(low.dweight, f32.dweight, o.dscale, o.dscale_bound));
}

namespace {

testing::AssertionResult b1_within(const ref::HostTensor &dx32, const std::vector<double> &oracle, const std::vector<double> *terms,
                                   double *worst) {
    double w = 0;
    for (std::int64_t i = 0; i < dx32.size(); ++i) {
        const double a = dx32.get(i), b = oracle[i];
        if (same_special(a, b)) continue;
        const double bound = 1e-5 + 1e-5 * std::fabs(b) + (terms ? std::ldexp((*terms)[i], -20) : 0.0);
        const double ratio = std::fabs(a - b) / bound;
        if (!(ratio <= 1.0)) {
            return testing::AssertionFailure() << "B1: dx element " << i << " is " << a << ", oracle " << b << ", bound " << bound;
        }
        w = std::max(w, ratio);
    }
    if (worst) *worst = std::max(*worst, w);
    return testing::AssertionSuccess();
}

}  // namespace

testing::AssertionResult b1_close(const ref::HostTensor &dx32, const std::vector<double> &oracle, double *worst) {
    return b1_within(dx32, oracle, nullptr, worst);
}

testing::AssertionResult b1_close(const ref::HostTensor &dx32, const Gradients &oracle, double *worst) {
    return b1_within(dx32, oracle.dx, &oracle.dx_terms, worst);
}

testing::AssertionResult b2_close(const ref::HostTensor &dscale32, const std::vector<double> &oracle,
                                  const std::vector<double> &bound, double *worst) {
    double w = 0;
    for (std::int64_t i = 0; i < dscale32.size(); ++i) {
        const double a = dscale32.get(i), b = oracle[i];
        if (same_special(a, b)) continue;
        const double ratio = std::fabs(a - b) / (1e-5 * (1.0 + bound[i]));
        if (!(ratio <= 1.0)) {
            return testing::AssertionFailure() << "B2: dscale element " << i << " is " << a << ", oracle " << b << ", bound sum "
                                               << bound[i];
        }
        w = std::max(w, ratio);
    }
    if (worst) *worst = std::max(*worst, w);
    return testing::AssertionSuccess();
}

namespace {

// Within one local ULP of the oracle's cast plus `allowance` per element.
testing::AssertionResult b3_within(const ref::HostTensor &low, const ref::HostTensor &own32, const std::vector<double> &oracle,
                                const std::vector<double> &allowance, std::int64_t *beyond_one_ulp) {
    if (auto own = ref::gate2_cast_of_own_f32(low.view(), own32.view()); !own) return own;
    ref::HostTensor oracle_low(low.dtype(), low.shape());
    for (std::int64_t i = 0; i < low.size(); ++i) {
        oracle_low.set(i, static_cast<float>(oracle[i]));
        const double a = low.get(i), b = oracle[i];
        if (same_special(a, b)) continue;
        const double ulp = ref::local_ulp(low.dtype(), static_cast<std::uint16_t>(oracle_low.bits(i)));
        if (beyond_one_ulp && !(std::fabs(a - b) <= ulp)) ++*beyond_one_ulp;
        if (!(std::fabs(a - b) <= ulp + allowance[i])) {
            return testing::AssertionFailure() << "B3: element " << i << " is " << a << ", oracle " << b << ", local ULP " << ulp
                                               << ", allowance " << allowance[i];
        }
    }
    return testing::AssertionSuccess();
}

}  // namespace

testing::AssertionResult b3_one_ulp(const ref::HostTensor &low, const ref::HostTensor &own32, const std::vector<double> &oracle,
                                    const std::vector<double> &terms, std::int64_t *beyond_one_ulp) {
    std::vector<double> cancelling(terms.size());
    for (std::size_t i = 0; i < terms.size(); ++i) cancelling[i] = std::ldexp(terms[i], -20);
    return b3_within(low, own32, oracle, cancelling, beyond_one_ulp);
}


}  // namespace backward_test
