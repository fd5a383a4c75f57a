// The tuner's parts that decide what a build ships: its search space is knobs.def's and nothing
// else, its classes' bounds tile the calls, its strategy finds a known optimum, and a record
// comes back from its file as it went in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>

#include "bench.hpp"
#include "cases.hpp"
#include "knob_space.hpp"
#include "knobs.h"
#include "record.hpp"
#include "strategy.hpp"

namespace {

using namespace magi2norm::tuning;

TEST(KnobSpace, EveryDefaultIsALegalValue) {
    for (const Knob &k : knobs()) {
        EXPECT_NE(std::find(k.values.begin(), k.values.end(), k.default_value), k.values.end()) << k.name;
        EXPECT_TRUE(std::is_sorted(k.values.begin(), k.values.end())) << k.name << ": values in order, for the descent";
    }
}

TEST(KnobSpace, TheSchedulesReadTheSameDefaults) {
    const magi2norm::schedules::CpuKnobs cpu;
    const magi2norm::schedules::GpuKnobs gpu;
    EXPECT_EQ(knob("cpu_task_bytes").default_value, cpu.task_bytes);
    EXPECT_EQ(knob("cpu_chunk_bytes").default_value, cpu.chunk_bytes);
    EXPECT_EQ(knob("cpu_memory_task_bytes").default_value, cpu.memory_task_bytes);
    EXPECT_EQ(knob("gpu_threads").default_value, gpu.threads);
    EXPECT_EQ(knob("gpu_unroll").default_value, gpu.unroll);
    const magi2norm::schedules::CpuBackwardKnobs backward;
    EXPECT_EQ(knob("cpu_backward_tile_elements").default_value, backward.tile_elements);
    EXPECT_EQ(knob("cpu_backward_task_tokens").default_value, backward.task_tokens);
    EXPECT_EQ(knob("cpu_backward_task_elements").default_value, backward.task_elements);
    EXPECT_EQ(describe(default_config(Scope::cpu)), "");
    Config c = default_config(Scope::cpu);
    c["cpu_task_bytes"] = 131072;
    EXPECT_EQ(describe(c), "cpu_task_bytes=131072");
    EXPECT_NE(config_key(c), config_key(default_config(Scope::cpu)));
}

TEST(Classes, BoundsHoldTheirCallsAndTileTheAxes) {
    for (const std::int64_t dim : {1, 128, 256, 257, 3072, 12288, 100000}) {
        for (const std::int64_t bytes : {std::int64_t{1}, std::int64_t{262143}, std::int64_t{262144}, std::int64_t{50000000},
                                          std::numeric_limits<std::int64_t>::max()}) {
            const ShapeClass k = class_of(magi2norm::DType::bf16, magi2norm::DType::f32, dim, bytes, false);
            EXPECT_LE(k.dim_min, dim);
            EXPECT_GE(k.dim_max, dim);
            EXPECT_LE(k.bytes_min, bytes);
            EXPECT_GE(k.bytes_max, bytes);
            if (k.dim_min > 0) EXPECT_EQ(class_of(k.in, k.out, k.dim_min - 1, bytes, false).dim_max, k.dim_min - 1);
            if (k.bytes_min > 0) EXPECT_EQ(class_of(k.in, k.out, dim, k.bytes_min - 1, false).bytes_max, k.bytes_min - 1);
        }
    }
    EXPECT_TRUE(class_of(magi2norm::DType::f32, magi2norm::DType::f32, 12288, std::int64_t{1} << 30, false).from_memory);
    EXPECT_FALSE(class_of(magi2norm::DType::f32, magi2norm::DType::f32, 12288, 1 << 20, false).from_memory);
}

TEST(Classes, TheModelsNormsAtTheirSizes) {
    const auto cases = model_cases({16, 4096}, false);
    EXPECT_EQ(cases.size(), 18u);  // 4 norms with M = 1 and 3, the final norm with M = 1, at 2 sizes
    EXPECT_EQ(cases.front().id, "pre_norm/bf16_bf16/M1/T16");
    EXPECT_EQ(cases.front().bytes(), 16 * 3072 * 4);
}

TEST(Classes, TheBackwardsAfterTheForwardsInClassesOfTheirOwn) {
    const auto cases = model_cases({16, 4096}, true);
    ASSERT_EQ(cases.size(), 36u);
    for (std::size_t i = 0; i < 18; ++i) {
        const TuneCase &forward = cases[i], &backward = cases[i + 18];
        EXPECT_FALSE(forward.backward);
        EXPECT_TRUE(backward.backward);
        EXPECT_EQ(backward.id, forward.id + "/backward");
        EXPECT_EQ(backward.shape, forward.shape);
        // x and dx in x's dtype, dy in the forward's output dtype.
        const auto size = [](magi2norm::DType d) { return static_cast<std::int64_t>(magi2norm::dtype_size(d)); };
        EXPECT_EQ(backward.bytes(), forward.elements() * (2 * size(forward.in) + size(forward.out)));
        const ShapeClass f = class_of(forward), b = class_of(backward);
        EXPECT_FALSE(f.backward);
        EXPECT_TRUE(b.backward);
        EXPECT_EQ(b.name.rfind("backward/", 0), 0u) << b.name;
        EXPECT_NE(f.name, b.name);
    }
    EXPECT_EQ(cases[18].bytes(), 16 * 3072 * 6);  // pre-norm: BF16 x, dy and dx
}

// A synthetic cost over the CPU knobs with its optimum away from the defaults: each knob's cost
// grows with its distance (in steps of its legal values) from a target value, and two knobs
// interact (task_bytes' best value follows split_bytes'), so the first pass's moves undo part
// of each other. Time ratios come back exactly, with a small noise.
struct SyntheticCost {
    Config target;
    int evaluations = 0;

    static int index_of(const std::string &name, std::int64_t v) {
        const auto &values = knob(name).values;
        return static_cast<int>(std::find(values.begin(), values.end(), v) - values.begin());
    }
    double operator()(const Config &c) const {
        double cost = 1;
        for (const auto &[name, value] : target) {
            int want = index_of(name, value);
            if (name == "cpu_task_bytes") want = std::min<int>(4, index_of("cpu_split_bytes", c.at("cpu_split_bytes")));
            cost *= 1 + (name == "cpu_split_bytes" ? 0.3 : 0.2) * std::abs(index_of(name, c.at(name)) - want);
        }
        return cost;
    }
};

TEST(Strategy, FindsTheKnownOptimumOfASyntheticCost) {
    SyntheticCost cost;
    cost.target = default_config(Scope::cpu);
    cost.target["cpu_split_bytes"] = 131072;  // index 4: task_bytes wants its index 4 (262144)
    cost.target["cpu_chunk_bytes"] = 4096;
    cost.target["cpu_prefetch_bytes"] = 16777216;
    cost.target["cpu_vector_width"] = 32;
    Config optimum = cost.target;
    optimum["cpu_task_bytes"] = 262144;
    ASSERT_DOUBLE_EQ(cost(optimum), 1);

    StrategyCalls calls;
    calls.knobs_of = [](const Config &) {
        std::vector<std::string> names;
        for (const Knob &k : knobs()) {
            if (k.scope == Scope::cpu) names.push_back(k.name);
        }
        return names;
    };
    const int budget = 200;  // evaluations; the space holds 4 x 5^5 = 12500 configurations
    calls.time_left = [&] { return cost.evaluations < budget; };
    calls.evaluate = [&](const std::vector<Config> &tries, const Config *incumbent) {
        const double base = cost(incumbent ? *incumbent : default_config(Scope::cpu));
        std::vector<Outcome> outcomes;
        for (const Config &c : tries) {
            ++cost.evaluations;
            Outcome o;
            o.ok = true;
            o.vs_incumbent = cost(c) / base;
            o.score = cost(c) / cost(default_config(Scope::cpu));
            o.noise = 0.005;
            outcomes.push_back(o);
        }
        return outcomes;
    };
    const StrategyResult found = coordinate_search(default_config(Scope::cpu), calls, 7);
    EXPECT_TRUE(found.moved);
    EXPECT_EQ(found.best, optimum) << describe(found.best);
    EXPECT_LE(cost.evaluations, budget);
}

// Two knobs whose only improvement is a move of both at once (each alone costs more): no pass
// of coordinate descent leaves the defaults, a restart does.
TEST(Strategy, RestartsMoveTwoKnobsThatOnlyWinTogether) {
    const auto cost = [](const Config &c) {
        const bool task = c.at("cpu_task_bytes") == 262144, split = c.at("cpu_split_bytes") == 131072;
        const bool task_default = c.at("cpu_task_bytes") == knob("cpu_task_bytes").default_value;
        const bool split_default = c.at("cpu_split_bytes") == knob("cpu_split_bytes").default_value;
        if (task && split) return 0.5;
        return task_default && split_default ? 1.0 : 1.5;
    };
    StrategyCalls calls;
    calls.knobs_of = [](const Config &) { return std::vector<std::string>{"cpu_task_bytes", "cpu_split_bytes"}; };
    int evaluations = 0;
    calls.time_left = [&] { return evaluations < 400; };
    calls.evaluate = [&](const std::vector<Config> &tries, const Config *incumbent) {
        std::vector<Outcome> outcomes;
        for (const Config &c : tries) {
            ++evaluations;
            Outcome o;
            o.ok = true;
            o.vs_incumbent = cost(c) / cost(incumbent ? *incumbent : default_config(Scope::cpu));
            o.noise = 0.005;
            outcomes.push_back(o);
        }
        return outcomes;
    };
    const StrategyResult found = coordinate_search(default_config(Scope::cpu), calls, 7);
    EXPECT_TRUE(found.moved);
    EXPECT_EQ(found.best.at("cpu_task_bytes"), 262144);
    EXPECT_EQ(found.best.at("cpu_split_bytes"), 131072);
}

TEST(Strategy, KeepsTheStartWhenNothingBeatsItByMoreThanTheNoise) {
    StrategyCalls calls;
    calls.knobs_of = [](const Config &) { return std::vector<std::string>{"cpu_task_bytes", "cpu_chunk_bytes"}; };
    int evaluations = 0;
    calls.time_left = [&] { return evaluations < 40; };
    calls.evaluate = [&](const std::vector<Config> &tries, const Config *) {
        std::vector<Outcome> outcomes;
        for (std::size_t i = 0; i < tries.size(); ++i) {
            ++evaluations;
            Outcome o;
            o.ok = true;
            o.vs_incumbent = 0.995;  // within the noise
            o.noise = 0.02;
            outcomes.push_back(o);
        }
        return outcomes;
    };
    const StrategyResult found = coordinate_search(default_config(Scope::cpu), calls, 1);
    EXPECT_FALSE(found.moved);
    EXPECT_EQ(found.best, default_config(Scope::cpu));
}

// A class that starts from a neighbouring class's best: every try is timed against it (not the
// default), and it stays the pick when nothing beats it.
TEST(Strategy, StartsFromANeighboursBestAsTheIncumbent) {
    Config start = default_config(Scope::cpu);
    start["cpu_task_bytes"] = 262144;
    Outcome start_outcome;
    start_outcome.ok = true;
    start_outcome.score = 0.9;
    start_outcome.id = "neighbour's best here";
    StrategyCalls calls;
    calls.knobs_of = [](const Config &) { return std::vector<std::string>{"cpu_task_bytes", "cpu_chunk_bytes"}; };
    int evaluations = 0, against_start = 0;
    calls.time_left = [&] { return evaluations < 20; };
    calls.evaluate = [&](const std::vector<Config> &tries, const Config *incumbent) {
        if (incumbent && *incumbent == start) ++against_start;
        std::vector<Outcome> outcomes;
        for (std::size_t i = 0; i < tries.size(); ++i) {
            ++evaluations;
            Outcome o;
            o.ok = true;
            o.vs_incumbent = 1.02;
            o.noise = 0.005;
            outcomes.push_back(o);
        }
        return outcomes;
    };
    const StrategyResult found = coordinate_search(start, calls, 3, &start_outcome);
    EXPECT_TRUE(found.moved);
    EXPECT_EQ(found.best, start);
    EXPECT_EQ(found.outcome.id, start_outcome.id);
    EXPECT_GT(against_start, 0);
    EXPECT_GE(evaluations, 20);
}

TEST(Record, ComesBackAsItWentIn) {
    Record r;
    r.generator_version = "abc";
    r.machine.cpu = "a cpu";
    r.machine.isa = "x86-64-linux-sse41";
    r.machine.vendor = "AuthenticAMD";
    r.machine.family = 25;
    r.machine.model = 17;
    r.machine.stepping = 1;
    r.machine.cores = 2;
    r.machine.threads = 4;
    r.machine.l2 = 1 << 20;
    r.machine.l3 = 1 << 25;
    r.runtime["streaming_min_output_bytes"] = 8 << 20;
    r.cases = model_cases({16}, true);  // the last a backward case, of a backward class
    Measured m;
    m.id = "bf16_bf16/d4096/b256K#0";
    m.class_name = "bf16_bf16/d4096/b256K";
    m.strategy = "coordinate";
    m.schedule.config = default_config(Scope::cpu);
    m.schedule.config["cpu_chunk_bytes"] = 32768;
    m.cases["pre_norm/bf16_bf16/M1/T16"] = CaseTimes{2e-6, 1.5e-6, 0.02, 30, 7};
    r.measured.push_back(m);
    ClassResult c;
    c.klass = class_of(r.cases.front());
    c.best = m.id;
    c.params["cpu_chunk_bytes"] = 32768;
    c.significant = true;
    c.confirmation.status = "shipped: ...";
    c.confirmation.speedup = RatioInterval{1.2, 1.1, 1.3, 20};
    c.confirmation.cases["pre_norm/bf16_bf16/M1/T16"] = RatioInterval{1.2, 1.1, 1.3, 20};
    c.confirmation.seconds = 3.5;
    c.spend = Spend{12, 40.5, 2, "defaults"};
    r.classes.push_back(c);
    ClassResult unconfirmed;
    unconfirmed.klass = class_of(r.cases.back());
    unconfirmed.best = "x";
    unconfirmed.confirmation.speedup = RatioInterval{1.0, 0, HUGE_VAL, 1};  // one round: no upper bound
    r.classes.push_back(unconfirmed);
    const std::string path = testing::TempDir() + "/record.json";
    save(r, path);
    const auto back = load(path);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->machine.isa, r.machine.isa);
    EXPECT_EQ(machine_difference(back->machine, r.machine), "");
    EXPECT_EQ(back->machine.threads, 4);
    EXPECT_EQ(back->runtime, r.runtime);
    EXPECT_EQ(back->cases.size(), r.cases.size());
    EXPECT_FALSE(back->cases.front().backward);
    EXPECT_TRUE(back->cases.back().backward);
    ASSERT_EQ(back->measured.size(), 1u);
    EXPECT_NE(back->find(m.class_name, m.schedule), nullptr);
    EXPECT_DOUBLE_EQ(back->measured[0].score(), 0.75);
    ASSERT_EQ(back->classes.size(), 2u);
    EXPECT_EQ(back->classes[0].params, c.params);
    EXPECT_FALSE(back->classes[0].klass.backward);
    EXPECT_TRUE(back->classes[1].klass.backward);
    EXPECT_EQ(back->classes[1].klass.name, unconfirmed.klass.name);
    EXPECT_EQ(back->classes[0].klass.bytes_max, c.klass.bytes_max);
    EXPECT_EQ(back->classes[0].confirmation.status, c.confirmation.status);
    EXPECT_DOUBLE_EQ(back->classes[0].confirmation.speedup.lower, 1.1);
    EXPECT_EQ(back->classes[0].confirmation.cases.at("pre_norm/bf16_bf16/M1/T16").rounds, 20);
    EXPECT_EQ(back->classes[0].spend.candidates, 12);
    EXPECT_DOUBLE_EQ(back->classes[0].spend.seconds, 40.5);
    EXPECT_EQ(back->classes[0].spend.start, "defaults");
    EXPECT_TRUE(std::isinf(back->classes[1].confirmation.speedup.upper));

    // The record alone (what a build reads, and what is committed): the picks and their
    // confirmation; the measured schedules and the spend are the log's.
    std::ifstream record_file(path);
    const std::string text((std::istreambuf_iterator<char>(record_file)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("candidates"), std::string::npos);
    EXPECT_EQ(text.find("spend"), std::string::npos);
    ASSERT_EQ(std::remove(search_log_path(path).c_str()), 0);
    const auto alone = load(path);
    ASSERT_TRUE(alone);
    EXPECT_TRUE(alone->measured.empty());
    EXPECT_TRUE(alone->cases.empty());
    ASSERT_EQ(alone->classes.size(), 2u);
    EXPECT_EQ(alone->classes[0].best, m.id);
    EXPECT_TRUE(alone->classes[0].significant);
    EXPECT_DOUBLE_EQ(alone->classes[0].confirmation.speedup.upper, 1.3);
    EXPECT_EQ(alone->classes[0].spend.candidates, 0);
    std::remove(path.c_str());
}

TEST(Record, TheSearchLogIsNamedAfterTheRecord) {
    EXPECT_EQ(search_log_path("dir/cpu.json"), "dir/cpu.search.json");
    EXPECT_EQ(search_log_path("record"), "record.search.json");
}

TEST(Record, AnOldFormatRecordIsRefusedByName) {
    const std::string path = testing::TempDir() + "/old_record.json";
    std::FILE *f = std::fopen(path.c_str(), "w");
    std::fputs("{\"format\": \"magi2norm-tuning/1\", \"generator_version\": \"abc\"}\n", f);
    std::fclose(f);
    try {
        load(path);
        ADD_FAILURE() << "a magi2norm-tuning/1 record was read";
    } catch (const std::exception &e) {
        EXPECT_NE(std::string(e.what()).find("magi2norm-tuning/1 record, from before the machine keys"), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
}

TEST(Measure, CutsOnlyACandidateThatCannotWin) {
    CaseBench::Times t;
    t.kernels = {{1.0, 1.1}, {1.05, 0.95}, {2.3, 2.25}};
    EXPECT_TRUE(hopeless(t));  // its fastest over twice the library's slowest
    t.kernels[2] = {2.3, 2.15};
    EXPECT_FALSE(hopeless(t));  // one sample within reach: more rounds may tell
    t.kernels[2] = {};
    EXPECT_FALSE(hopeless(t));
    t.kernels[2] = {5.0};
    const CaseTimes c = case_times(t);
    EXPECT_EQ(c.rounds, 1);
    EXPECT_DOUBLE_EQ(c.schedule_s, 5.0);
    EXPECT_DOUBLE_EQ(c.library_s, 1.05);  // the faster median of the library's two runs
}

}  // namespace
