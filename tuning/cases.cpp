#include "cases.hpp"

#include <limits>

#include "model_norms.hpp"

namespace magi2norm::tuning {

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t KiB = 1024, MiB = 1024 * 1024;

// Upper bounds (inclusive) of the buckets, and their labels.
struct Bucket {
    std::int64_t max;
    const char *label;
};
constexpr Bucket kDims[] = {{256, "d256"}, {1024, "d1024"}, {4096, "d4096"}, {16384, "d16384"}, {kMax, "dmax"}};
constexpr Bucket kBytes[] = {{256 * KiB - 1, "b256K"}, {4 * MiB - 1, "b4M"}, {32 * MiB - 1, "b32M"},
                             {256 * MiB - 1, "b256M"}, {kMax, "bmax"}};
constexpr std::int64_t kFromMemoryBytes = 32 * MiB;

template <std::size_t N>
const Bucket &bucket(const Bucket (&buckets)[N], std::int64_t value, std::int64_t &min) {
    min = 0;
    for (const Bucket &b : buckets) {
        if (value <= b.max) return b;
        min = b.max + 1;
    }
    return buckets[N - 1];
}

}  // namespace

std::int64_t TuneCase::rows_per_token() const {
    std::int64_t rows = 1;
    for (std::size_t i = 1; i + 1 < shape.size(); ++i) rows *= shape[i];
    return rows;
}

std::int64_t TuneCase::elements() const {
    std::int64_t n = 1;
    for (const std::int64_t e : shape) n *= e;
    return n;
}

std::int64_t TuneCase::bytes() const {
    return elements() * static_cast<std::int64_t>(dtype_size(in) + dtype_size(out) + (backward ? dtype_size(in) : 0));
}

std::vector<TuneCase> model_cases(const std::vector<std::int64_t> &tokens, bool with_backward) {
    std::vector<TuneCase> cases;
    for (const bool backward : {false, true}) {
        if (backward && !with_backward) break;
        for (const measure::ModelNorm &n : measure::model_norms()) {
            for (const std::int64_t m : {1, 3}) {
                if (m > 1 && !n.grouped) continue;
                for (const std::int64_t t : tokens) {
                    TuneCase c;
                    c.norm = n.name;
                    c.in = n.x;
                    c.out = n.out;
                    c.backward = backward;
                    c.shape = {t};
                    c.shape.insert(c.shape.end(), n.row.begin(), n.row.end());
                    c.num_modality = m;
                    c.id = n.label() + "/M" + std::to_string(m) + "/T" + std::to_string(t) + (backward ? "/backward" : "");
                    cases.push_back(c);
                }
            }
        }
    }
    return cases;
}

ShapeClass class_of(DType in, DType out, std::int64_t dim, std::int64_t bytes, bool backward) {
    ShapeClass c;
    c.in = in;
    c.out = out;
    c.backward = backward;
    const Bucket &d = bucket(kDims, dim, c.dim_min);
    const Bucket &b = bucket(kBytes, bytes, c.bytes_min);
    c.dim_max = d.max;
    c.bytes_max = b.max;
    c.from_memory = c.bytes_min >= kFromMemoryBytes;
    c.name = std::string(backward ? "backward/" : "") + dtype_name(in) + "_" + dtype_name(out) + "/" + d.label + "/" + b.label;
    return c;
}

ShapeClass class_of(const TuneCase &c) { return class_of(c.in, c.out, c.dim(), c.bytes(), c.backward); }

Scope knob_scope(const ShapeClass &klass, bool gpu) {
    if (gpu) return Scope::gpu;
    return klass.backward ? Scope::cpu_backward : Scope::cpu;
}

}  // namespace magi2norm::tuning
