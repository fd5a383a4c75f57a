#include "norm_case.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "magi2norm/internal.hpp"
#include "random_values.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"

namespace contract {

GroupingSpec GroupingSpec::by_sizes(std::vector<std::int64_t> sizes) {
    GroupingSpec spec;
    spec.kind = Kind::sizes;
    spec.num_modality = static_cast<std::int64_t>(sizes.size());
    spec.sizes = std::move(sizes);
    return spec;
}

GroupingSpec GroupingSpec::by_ids(std::vector<std::int32_t> ids, std::int64_t num_modality) {
    GroupingSpec spec;
    spec.kind = Kind::ids;
    spec.num_modality = num_modality;
    spec.ids = std::move(ids);
    return spec;
}

GroupingSpec GroupingSpec::by_dispatcher(std::vector<std::int32_t> mapping, std::int64_t num_modality) {
    GroupingSpec spec = by_ids(std::move(mapping), num_modality);
    spec.kind = Kind::dispatcher;
    return spec;
}

magi2norm::Grouping GroupingSpec::library() const {
    switch (kind) {
    case Kind::none: return magi2norm::Grouping::none();
    case Kind::sizes: return magi2norm::Grouping::sizes(sizes);
    case Kind::ids: return magi2norm::Grouping::ids(ids.data(), static_cast<std::int64_t>(ids.size()));
    case Kind::dispatcher:
        return magi2norm::Grouping::from(
            magi2norm::ModalityDispatcher(ids.data(), static_cast<std::int64_t>(ids.size()), num_modality));
    }
    return magi2norm::Grouping::none();
}

std::vector<std::int32_t> GroupingSpec::token_modality() const {
    switch (kind) {
    case Kind::none: return {};
    case Kind::sizes: return ref::modality_from_sizes(sizes);
    case Kind::ids: return ids;
    // Dispatched order is sorted by modality, so the groups are the bincount of the mapping.
    case Kind::dispatcher: return ref::modality_from_sizes(bincount(ids, num_modality));
    }
    return {};
}

std::string GroupingSpec::describe() const {
    switch (kind) {
    case Kind::none: return "no grouping";
    case Kind::sizes: return "group sizes " + ref::format_shape(sizes);
    case Kind::ids: return "unsorted ids (M=" + std::to_string(num_modality) + ")";
    case Kind::dispatcher: return "dispatcher (M=" + std::to_string(num_modality) + ")";
    }
    return "?";
}

DType NormCase::out_dtype() const {
    if (out_override) return *out_override;
    if (config.out_dtype) return *config.out_dtype;
    return x.dtype;
}

std::string NormCase::describe() const {
    std::string text = std::string("x ") + magi2norm::dtype_name(x.dtype) + " " + ref::format_shape(x.shape);
    if (!x.strides.empty()) text += " strides " + ref::format_shape(x.strides);
    text += ", D=" + std::to_string(config.dim) + " M=" + std::to_string(config.num_modality) +
            " P=" + std::to_string(config.num_patterns) + ", weight " + magi2norm::dtype_name(weight.dtype()) + ", " +
            grouping.describe() + ", out " + magi2norm::dtype_name(out_dtype());
    if (out_override) text += " (per-call override)";
    if (config.out_dtype) text += std::string(" config out ") + magi2norm::dtype_name(*config.out_dtype);
    return text;
}

ref::Params params_of(const magi2norm::NormConfig &config) {
    return ref::Params{config.dim, config.eps, config.num_modality, config.num_patterns};
}

ref::HostTensor run_library(const NormCase &c, std::optional<DType> out_override) {
    NormCase resolved = c;
    resolved.out_override = out_override;
    ref::HostTensor out(resolved.out_dtype(), ref::output_shape(c.x.shape, c.config.num_patterns));
    // Poisoned (0xABAB...: a small negative number in every dtype, not zero, not NaN), so that
    // an element the library never writes cannot pass for an expected zero.
    out.fill_bytes(0xAB);
    const magi2norm::RMSNorm norm(c.config, c.weight.view());
    norm.forward(c.x, c.grouping.library(), out.view(), out_override);
    return out;
}

ref::HostTensor run_library(const NormCase &c) { return run_library(c, c.out_override); }

ref::HostTensor run_reference(const NormCase &c) {
    return ref::rms_norm(params_of(c.config), c.weight.view(), c.x, c.grouping.token_modality());
}

void expect_contract(const NormCase &c) {
    SCOPED_TRACE(c.describe());
    const ref::HostTensor x_before = ref::HostTensor::copy_of(c.x);
    const ref::Bytes weight_before = c.weight.bytes();

    const ref::HostTensor out = run_library(c);
    const ref::HostTensor own_f32 = run_library(c, DType::f32);
    const ref::HostTensor y32 = run_reference(c);

    EXPECT_TRUE(ref::gate1_close(own_f32.view(), y32.view()));
    if (out.dtype() == DType::f32) {
        EXPECT_TRUE(ref::identical(out.view(), own_f32.view()));
    } else {
        EXPECT_TRUE(ref::gate2_cast_of_own_f32(out.view(), own_f32.view()));
        EXPECT_TRUE(ref::gate3_within_local_ulp(out.view(), y32.cast(out.dtype()).view()));
    }
    EXPECT_TRUE(ref::identical(c.x, x_before.view())) << "the input changed";
    EXPECT_TRUE(c.weight.bytes() == weight_before) << "the weight changed";
}

ref::HostTensor forward_off_word_boundary(const magi2norm::RMSNorm &norm, const ref::HostTensor &x,
                                          const magi2norm::Grouping &grouping, const ref::Shape &out_shape,
                                          const std::vector<std::int64_t> &out_strides, std::int64_t span) {
    ref::HostTensor shifted_x(DType::bf16, {x.size() + 1});
    std::memcpy(shifted_x.data_at(1), x.data(), x.bytes().size());
    ref::HostTensor shifted_out(DType::bf16, {span + 1});
    shifted_out.fill_bytes(0xAB);
    norm.forward(magi2norm::ConstTensorView(shifted_x.data_at(1), DType::bf16, x.shape()), grouping,
                 magi2norm::TensorView(shifted_out.data_at(1), DType::bf16, out_shape, out_strides));
    ref::HostTensor out(DType::bf16, {span});
    std::memcpy(out.data(), shifted_out.data_at(1), out.bytes().size());
    return out;
}

namespace {

// A family without the class tag that a tuned build's class variants carry after the backend and
// capability ("cpu_t1_paired" -> "cpu_paired", "cuda86_t2" -> "cuda86"): the same kind of variant.
std::string without_class_tag(std::string family) {
    const std::size_t tag = family.find('_');
    if (tag == std::string::npos || family.compare(tag, 2, "_t") != 0) return family;
    const std::size_t end = std::min(family.find('_', tag + 1), family.size());
    if (end == tag + 2 || family.find_first_not_of("0123456789", tag + 2) < end) return family;
    return family.erase(tag, end - tag);
}

}  // namespace

bool native_bf16_runs() {
    static const bool runs = magi2norm::detail::cpu_runs(magi2norm::detail::Isa::avx512_bf16) &&
                             magi2norm::detail::kernel_named("magi2_norm_cpu_avx512bf16_bf16_bf16") != nullptr;
    return runs;
}

std::string cpu_family_run(DType out, const std::string &family) {
    if (out != DType::bf16 || !native_bf16_runs()) return family;
    if (family == "cpu" || family == "cpu_paired") return "cpu_avx512bf16";
    if (family == "cpu_streaming" || family == "cpu_paired_streaming") return "cpu_avx512bf16_streaming";
    return family;
}

testing::AssertionResult ran_variant(magi2norm::Backend backend, DType in, DType out, bool streaming, bool paired) {
    const std::string name = magi2norm::last_variant();
    const std::string prefix = "magi2_norm_", suffix = std::string("_") + magi2norm::dtype_name(in) + "_" + magi2norm::dtype_name(out);
    const bool framed = name.size() > prefix.size() + suffix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
                        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    const std::string family =
        framed ? without_class_tag(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size())) : "";
    const std::string own = magi2norm::backend_name(backend);
    const bool cuda_cc = backend == magi2norm::Backend::cuda && family.size() > own.size() && family.compare(0, own.size(), own) == 0 &&
                         family.find_first_not_of("0123456789", own.size()) == std::string::npos;
    const std::string cpu_family = std::string("cpu") + (paired ? "_paired" : "") + (streaming ? "_streaming" : "");
    const bool native = backend == magi2norm::Backend::cpu && cpu_family_run(out, cpu_family) != cpu_family;
    const bool expected = native || streaming || paired ? family == cpu_family_run(out, cpu_family) : family == own || cuda_cc;
    if (expected) return testing::AssertionSuccess();
    return testing::AssertionFailure() << "last_variant() is \"" << name << "\", expected a"
                                       << (paired ? " paired-word" : "") << (streaming ? " streaming-store" : "") << " "
                                       << own << " variant for " << magi2norm::dtype_name(in) << " -> " << magi2norm::dtype_name(out);
}

}  // namespace contract
