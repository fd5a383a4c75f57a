#include "batch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "bench.hpp"

namespace magi2norm::tuning {

namespace {


// The schedules of a GPU class: the defaults, each knob's other values, then random ones.
std::vector<Schedule> batch_schedules(const std::string &class_name, std::uint64_t seed, int random_count) {
    std::vector<Schedule> out;
    Schedule base;
    base.config = default_config(Scope::gpu);
    out.push_back(base);
    for (const auto &[name, value] : base.config) {
        for (const std::int64_t v : knob(name).values) {
            if (v == value) continue;
            Schedule s = base;
            s.config[name] = v;
            out.push_back(s);
        }
    }
    std::mt19937_64 rng(seed ^ std::hash<std::string>{}(class_name));
    std::set<std::string> seen;
    for (const Schedule &s : out) seen.insert(describe(s.config));
    for (int i = 0, tries = 0; i < random_count && tries < 100 * random_count; ++tries) {
        Schedule s = base;
        for (auto &[name, value] : s.config) {
            const auto &values = knob(name).values;
            value = values[rng() % values.size()];
        }
        if (seen.insert(describe(s.config)).second) {
            out.push_back(s);
            ++i;
        }
    }
    return out;
}

detail::KernelEntry entry_of(const TuneCase &c, Backend backend, int capability) {
    return detail::KernelEntry{backend, capability, detail::Form::elements, 0, c.in, c.out, nullptr, nullptr};
}

}  // namespace

void prepare_batch(Record &record, Compiler &compiler, Backend backend, int random_per_class) {
    std::map<std::string, std::vector<const TuneCase *>> members;
    for (const TuneCase &c : record.cases) members[class_of(c).name].push_back(&c);
    const int capability = record.machine.compute_capability;
    for (const auto &[name, cases] : members) {
        const std::vector<Schedule> schedules = batch_schedules(name, record.seed, random_per_class);
        std::vector<VariantRequest> requests;
        for (const Schedule &s : schedules) {
            for (const TuneCase *c : cases) {
                VariantRequest r;
                r.schedule = s;
                r.in = c->in;
                r.out = c->out;
                r.target = gpu_target(backend, capability);
                r.backend = backend;
                r.compute_capability = capability;
                requests.push_back(r);
            }
        }
        // Loaded where they are measured: an OpenCL or CUDA runtime need not be here.
        const std::vector<Variant> made = compiler.make(requests, false);
        for (std::size_t i = 0; i < schedules.size(); ++i) {
            if (record.find(name, schedules[i])) continue;
            Measured m;
            m.id = name + "#" + std::to_string(i);
            m.class_name = name;
            m.strategy = "gpu-batch";
            m.schedule = schedules[i];
            m.status = "pending";
            for (std::size_t k = 0; k < cases.size(); ++k) {
                const Variant &v = made[i * cases.size() + k];
                m.compile_seconds += v.compile_seconds;
                if (!v.error.empty()) m.status = "rejected: " + v.error;
                m.variants[cases[k]->id] = v.name;
            }
            record.measured.push_back(m);
        }
        std::printf("  %-26s %zu schedules made\n", name.c_str(), schedules.size());
    }
}

void measure_pending(Record &record, const Compiler &compiler, Backend backend, int rounds) {
    std::map<std::string, std::unique_ptr<CaseBench>> benches;
    std::map<std::string, std::vector<unsigned char>> expected;
    const auto bench_of = [&](const TuneCase &c) -> CaseBench & {
        auto &b = benches[c.id];
        if (!b) {
            b = std::make_unique<CaseBench>(c, class_of(c), record.machine, backend);
            expected[c.id] = b->output(nullptr);
        }
        return *b;
    };
    for (Measured &m : record.measured) {
        if (m.status != "pending") continue;
        m.status = "ok";
        for (const TuneCase &c : record.cases) {
            if (!m.variants.count(c.id) || m.status != "ok") continue;
            const Variant v = compiler.load(m.variants.at(c.id), entry_of(c, backend, record.machine.compute_capability));
            if (!v.error.empty()) {
                m.status = "rejected: " + v.error;
                break;
            }
            CaseBench &bench = bench_of(c);
            try {
                if (bench.output(&v.entry) != expected.at(c.id)) {
                    m.status = "rejected: its output on " + c.id + " differs from the library's";
                    break;
                }
                const CaseBench::Times t = bench.measure({nullptr, nullptr, &v.entry}, rounds, true, true);
                m.cases[c.id] = case_times(t);
            } catch (const std::exception &e) {
                m.status = std::string("rejected: ") + e.what();
            }
        }
        std::printf("  %-26s %-44s %s\n", m.class_name.c_str(), m.schedule.describe().c_str(),
                    m.status == "ok" ? (std::to_string(m.score()).substr(0, 5) + " of the library's time").c_str() : m.status.c_str());
        std::fflush(stdout);
    }
}

void select_classes(Record &record) {
    std::map<std::string, ShapeClass> classes;
    for (const TuneCase &c : record.cases) classes.emplace(class_of(c).name, class_of(c));
    record.classes.clear();
    for (const auto &[name, klass] : classes) {
        ClassResult result;
        result.klass = klass;
        const Measured *best = nullptr;
        for (const Measured &m : record.measured) {
            if (m.class_name != name || m.status != "ok" || m.schedule.autoscheduled() || m.cases.empty()) continue;
            bool worse = false;
            for (const auto &[id, t] : m.cases) worse = worse || t.ratio() > 1 + std::max(t.noise, 0.01);
            if (worse || m.score() >= 1 - std::max(m.noise(), 0.01)) continue;
            if (!best || m.score() < best->score()) best = &m;
        }
        if (best) {
            result.best = best->id;
            for (const auto &[k, v] : best->schedule.config) {
                if (v != knob(k).default_value) result.params[k] = v;
            }
            result.score = best->score();
            result.noise = best->noise();
            result.significant = true;
        }
        record.classes.push_back(result);
    }
}

std::string gpu_target(Backend backend, int capability) {
    if (backend == Backend::opencl) return "x86-64-linux-sse41-opencl-cl_doubles";
    return "x86-64-linux-sse41-cuda-cuda_capability_" + std::to_string(capability >= 86 ? 86 : 80);
}

}  // namespace magi2norm::tuning
