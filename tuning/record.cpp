#include "record.hpp"

#include <cmath>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace magi2norm::tuning {

using nlohmann::json;

namespace {

constexpr const char *kFormat = "magi2norm-tuning/2";
constexpr const char *kLogFormat = "magi2norm-tuning-log/1";

DType dtype_of(const std::string &name) {
    const auto d = parse_dtype(name);
    if (!d) throw std::runtime_error("tuning record: unknown dtype " + name);
    return *d;
}

json to_json(const Schedule &s) {
    json j{{"kind", s.kind}};
    json params = json::object();
    for (const auto &[name, value] : s.config) {
        if (value != knob(name).default_value) params[name] = value;
    }
    j["params"] = params;
    if (s.autoscheduled()) {
        j["estimates"] = {s.estimate_tokens, s.estimate_rows, s.estimate_dim};
        j["dropout_seed"] = s.dropout_seed;
    }
    return j;
}

Schedule schedule_of(const json &j, Scope scope) {
    Schedule s;
    s.kind = j.at("kind").get<std::string>();
    s.config = default_config(scope);
    for (const auto &[name, value] : j.at("params").items()) s.config[name] = value.get<std::int64_t>();
    if (s.autoscheduled()) {
        const auto &e = j.at("estimates");
        s.estimate_tokens = e.at(0).get<std::int64_t>();
        s.estimate_rows = e.at(1).get<std::int64_t>();
        s.estimate_dim = e.at(2).get<std::int64_t>();
        s.dropout_seed = j.at("dropout_seed").get<int>();
    }
    return s;
}

bool same(const Schedule &a, const Schedule &b) {
    return a.kind == b.kind && describe(a.config) == describe(b.config) && a.estimate_tokens == b.estimate_tokens &&
           a.estimate_rows == b.estimate_rows && a.estimate_dim == b.estimate_dim && a.dropout_seed == b.dropout_seed;
}

// A backward class's in and out are x and dy, and its dx is x's dtype (the build reads the three).
json to_json(const ShapeClass &c) {
    json j = {{"name", c.name},       {"pass", c.backward ? "backward" : "forward"},
              {"in", dtype_name(c.in)}, {"out", dtype_name(c.out)},
              {"dim_min", c.dim_min}, {"dim_max", c.dim_max},         {"bytes_min", c.bytes_min},
              {"bytes_max", c.bytes_max}, {"from_memory", c.from_memory}};
    if (c.backward) j["dx"] = dtype_name(c.in);
    return j;
}

ShapeClass class_of_json(const json &j) {
    ShapeClass c;
    c.name = j.at("name").get<std::string>();
    c.in = dtype_of(j.at("in").get<std::string>());
    c.out = dtype_of(j.at("out").get<std::string>());
    c.backward = j.value("pass", "forward") == "backward";  // records of forward classes only have none
    c.dim_min = j.at("dim_min").get<std::int64_t>();
    c.dim_max = j.at("dim_max").get<std::int64_t>();
    c.bytes_min = j.at("bytes_min").get<std::int64_t>();
    c.bytes_max = j.at("bytes_max").get<std::int64_t>();
    c.from_memory = j.at("from_memory").get<bool>();
    return c;
}

// An interval's bounds as numbers; an unbounded upper end (fewer than 2 rounds) as null.
json to_json(const RatioInterval &r) {
    return {{"estimate", r.estimate}, {"lower", r.lower}, {"upper", std::isfinite(r.upper) ? json(r.upper) : json(nullptr)},
            {"rounds", r.rounds}};
}

RatioInterval interval_of(const json &j) {
    RatioInterval r;
    r.estimate = j.at("estimate").get<double>();
    r.lower = j.at("lower").get<double>();
    r.upper = j.at("upper").is_null() ? HUGE_VAL : j.at("upper").get<double>();
    r.rounds = j.at("rounds").get<int>();
    return r;
}

}  // namespace

double Measured::score() const {
    if (cases.empty()) return 1;
    double log_sum = 0;
    for (const auto &[id, t] : cases) log_sum += std::log(t.ratio());
    return std::exp(log_sum / static_cast<double>(cases.size()));
}

double Measured::noise() const {
    double n = 0;
    for (const auto &[id, t] : cases) n = std::max(n, t.noise);
    return n;
}

const Measured *Record::find(const std::string &class_name, const Schedule &schedule) const {
    for (const Measured &m : measured) {
        if (m.class_name == class_name && same(m.schedule, schedule)) return &m;
    }
    return nullptr;
}

namespace {

json machine_json(const Machine &m) {
    return {{"cpu", m.cpu},
            {"vendor", m.vendor},
            {"family", m.family},
            {"model", m.model},
            {"stepping", m.stepping},
            {"isa", m.isa},
            {"cores", m.cores},
            {"threads", m.threads},
            {"caches", {{"l1d", m.l1d}, {"l2", m.l2}, {"l3", m.l3}}},
            {"gpu", m.gpu.empty() ? json(nullptr) : json{{"name", m.gpu}, {"compute_capability", m.compute_capability}}}};
}

Machine machine_of(const json &m) {
    Machine r;
    r.cpu = m.at("cpu").get<std::string>();
    r.vendor = m.at("vendor").get<std::string>();
    r.family = m.at("family").get<int>();
    r.model = m.at("model").get<int>();
    r.stepping = m.at("stepping").get<int>();
    r.isa = m.at("isa").get<std::string>();
    r.cores = m.at("cores").get<int>();
    r.threads = m.at("threads").get<int>();
    r.l1d = m.at("caches").at("l1d").get<std::int64_t>();
    r.l2 = m.at("caches").at("l2").get<std::int64_t>();
    r.l3 = m.at("caches").at("l3").get<std::int64_t>();
    if (!m.at("gpu").is_null()) {
        r.gpu = m.at("gpu").at("name").get<std::string>();
        r.compute_capability = m.at("gpu").at("compute_capability").get<int>();
    }
    return r;
}

// A class as the build reads it, with its pick's confirmation; a class without a pick says why.
json class_json(const ClassResult &c) {
    json k = to_json(c.klass);
    json params = json::object();
    for (const auto &[name, value] : c.params) params[name] = value;
    k.update({{"params", params}, {"significant", c.significant}});
    if (c.best.empty()) {
        k["confirmation"] = {{"status", c.confirmation.status}};
        return k;
    }
    json confirmed_cases = json::object();
    for (const auto &[id, interval] : c.confirmation.cases) confirmed_cases[id] = to_json(interval);
    k["best"] = c.best;
    k["confirmation"] = {{"status", c.confirmation.status}, {"speedup", to_json(c.confirmation.speedup)},
                         {"cases", confirmed_cases}, {"seconds", c.confirmation.seconds}};
    return k;
}

ClassResult class_result_of(const json &c) {
    ClassResult k;
    k.klass = class_of_json(c);
    k.best = c.value("best", "");
    for (const auto &[name, value] : c.at("params").items()) k.params[name] = value.get<std::int64_t>();
    k.significant = c.at("significant").get<bool>();
    const json &confirmation = c.at("confirmation");
    k.confirmation.status = confirmation.at("status").get<std::string>();
    if (!k.best.empty()) {
        k.confirmation.speedup = interval_of(confirmation.at("speedup"));
        for (const auto &[id, interval] : confirmation.at("cases").items()) k.confirmation.cases[id] = interval_of(interval);
        k.confirmation.seconds = confirmation.at("seconds").get<double>();
    }
    return k;
}

json case_json(const TuneCase &c) {
    return {{"id", c.id}, {"norm", c.norm}, {"pass", c.backward ? "backward" : "forward"},
            {"in", dtype_name(c.in)}, {"out", dtype_name(c.out)}, {"shape", c.shape},
            {"num_modality", c.num_modality}, {"bytes", c.bytes()}, {"class", class_of(c).name}};
}

TuneCase case_of(const json &c) {
    TuneCase t;
    t.id = c.at("id").get<std::string>();
    t.norm = c.at("norm").get<std::string>();
    t.in = dtype_of(c.at("in").get<std::string>());
    t.out = dtype_of(c.at("out").get<std::string>());
    t.backward = c.value("pass", "forward") == "backward";
    t.shape = c.at("shape").get<std::vector<std::int64_t>>();
    t.num_modality = c.at("num_modality").get<std::int64_t>();
    return t;
}

json candidate_json(const Measured &m) {
    json cases = json::object();
    for (const auto &[id, t] : m.cases) {
        cases[id] = {{"library_s", t.library_s}, {"schedule_s", t.schedule_s}, {"ratio", t.ratio()},
                     {"noise", t.noise}, {"copy_gbps", t.copy_gbps}, {"rounds", t.rounds}};
    }
    return {{"id", m.id}, {"class", m.class_name}, {"strategy", m.strategy}, {"schedule", to_json(m.schedule)},
            {"status", m.status}, {"compile_seconds", m.compile_seconds}, {"score", m.score()}, {"cases", cases},
            {"variants", m.variants}};
}

// Each candidate's knobs are those of its class, as the log's cases give it.
Measured candidate_of(const json &c, const std::map<std::string, ShapeClass> &classes, bool gpu) {
    Measured x;
    x.id = c.at("id").get<std::string>();
    x.class_name = c.at("class").get<std::string>();
    x.strategy = c.at("strategy").get<std::string>();
    const auto klass = classes.find(x.class_name);
    const ShapeClass of_candidate = klass != classes.end() ? klass->second : ShapeClass{};  // none: a forward class
    x.schedule = schedule_of(c.at("schedule"), knob_scope(of_candidate, gpu));
    x.status = c.at("status").get<std::string>();
    x.compile_seconds = c.at("compile_seconds").get<double>();
    x.variants = c.at("variants").get<std::map<std::string, std::string>>();
    for (const auto &[id, t] : c.at("cases").items()) {
        CaseTimes times;
        times.library_s = t.at("library_s").get<double>();
        times.schedule_s = t.at("schedule_s").get<double>();
        times.noise = t.at("noise").get<double>();
        times.copy_gbps = t.at("copy_gbps").get<double>();
        times.rounds = t.at("rounds").get<int>();
        x.cases[id] = times;
    }
    return x;
}

// The search's log: what it measured, and what each class's search cost.
json log_json(const Record &r) {
    json j;
    j["format"] = kLogFormat;
    j["cases"] = json::array();
    for (const TuneCase &c : r.cases) j["cases"].push_back(case_json(c));
    j["runtime_times"] = json::array();
    for (const RuntimeTimes &t : r.runtime_times) {
        j["runtime_times"].push_back({{"knob", t.knob}, {"case", t.case_id}, {"value", t.value}, {"below_s", t.below_s},
                                      {"above_s", t.above_s}, {"noise", t.noise}});
    }
    j["candidates"] = json::array();
    for (const Measured &m : r.measured) j["candidates"].push_back(candidate_json(m));
    j["classes"] = json::object();
    for (const ClassResult &c : r.classes) {
        j["classes"][c.klass.name] = {{"score", c.score}, {"noise", c.noise},
                                      {"spend", {{"candidates", c.spend.candidates}, {"seconds", c.spend.seconds},
                                                 {"visits", c.spend.visits}, {"start", c.spend.start}}}};
    }
    return j;
}

void read_log(const json &j, const std::string &path, Record &r) {
    if (j.value("format", "") != kLogFormat) throw std::runtime_error(path + " is not a " + std::string(kLogFormat) + " log");
    for (const json &c : j.at("cases")) r.cases.push_back(case_of(c));
    for (const json &t : j.at("runtime_times")) {
        r.runtime_times.push_back({t.at("knob").get<std::string>(), t.at("case").get<std::string>(), t.at("value").get<std::int64_t>(),
                                   t.at("below_s").get<double>(), t.at("above_s").get<double>(), t.at("noise").get<double>()});
    }
    std::map<std::string, ShapeClass> classes;
    for (const TuneCase &t : r.cases) classes.emplace(class_of(t).name, class_of(t));
    for (const json &c : j.at("candidates")) r.measured.push_back(candidate_of(c, classes, r.backend != "cpu"));
    const json &searched = j.at("classes");
    for (ClassResult &k : r.classes) {
        if (!searched.contains(k.klass.name)) continue;
        const json &c = searched.at(k.klass.name);
        k.score = c.at("score").get<double>();
        k.noise = c.at("noise").get<double>();
        const json &spend = c.at("spend");
        k.spend.candidates = spend.at("candidates").get<int>();
        k.spend.seconds = spend.at("seconds").get<double>();
        k.spend.visits = spend.at("visits").get<int>();
        k.spend.start = spend.at("start").get<std::string>();
    }
}

void write_json(const json &j, const std::string &path) {
    const std::string part = path + ".part";
    std::ofstream(part) << j.dump(1) << "\n";
    if (std::rename(part.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot write " + path);
}

}  // namespace

std::string search_log_path(const std::string &record_path) {
    const std::string suffix = ".json";
    const bool json_name = record_path.size() > suffix.size() &&
                           record_path.compare(record_path.size() - suffix.size(), suffix.size(), suffix) == 0;
    return (json_name ? record_path.substr(0, record_path.size() - suffix.size()) : record_path) + ".search.json";
}

void save(const Record &r, const std::string &path) {
    json j;
    j["format"] = kFormat;
    j["generator_version"] = r.generator_version;
    j["backend"] = r.backend;
    j["machine"] = machine_json(r.machine);
    j["seed"] = r.seed;
    j["budget_seconds"] = r.budget_seconds;
    j["runtime"] = r.runtime;
    j["notes"] = r.notes;
    j["classes"] = json::array();
    for (const ClassResult &c : r.classes) j["classes"].push_back(class_json(c));
    write_json(log_json(r), search_log_path(path));
    write_json(j, path);
}

std::optional<Record> load(const std::string &path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    const json j = json::parse(in);
    const std::string format = j.value("format", "");
    if (format == "magi2norm-tuning/1") {
        throw std::runtime_error(path + " is a magi2norm-tuning/1 record, from before the machine keys and the confirmed picks: "
                                        "tune again with a new --record");
    }
    if (format != kFormat) throw std::runtime_error(path + " is not a " + std::string(kFormat) + " record");
    Record r;
    r.generator_version = j.at("generator_version").get<std::string>();
    r.backend = j.at("backend").get<std::string>();
    r.machine = machine_of(j.at("machine"));
    r.seed = j.at("seed").get<std::uint64_t>();
    r.budget_seconds = j.at("budget_seconds").get<double>();
    r.runtime = j.at("runtime").get<std::map<std::string, std::int64_t>>();
    r.notes = j.at("notes").get<std::vector<std::string>>();
    for (const json &c : j.at("classes")) r.classes.push_back(class_result_of(c));
    const std::string log_path = search_log_path(path);
    if (std::ifstream log{log_path}) read_log(json::parse(log), log_path, r);
    return r;
}

}  // namespace magi2norm::tuning
