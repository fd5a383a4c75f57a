// Norm weights from safetensors checkpoints: every dtype and shape with M*P*D elements loads to
// the scale float32(W(w + 1)) (computed here by the reference), the prefix loaders pick the right
// modules, and missing keys, wrong shapes or dtypes and malformed files are refused with the
// right ErrorCode and a message that names the problem.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "magi2norm/checkpoint.hpp"
#include "random_values.hpp"
#include "reference/reference.hpp"
#include "test_files.hpp"
#include "throws_error.hpp"

namespace {

using contract::throws_error;
using magi2norm::Checkpoint;
using magi2norm::DType;
using magi2norm::ErrorCode;
using magi2norm::NormConfig;

struct Weight {
    std::string key;
    ref::HostTensor values;
};

void write_checkpoint(const std::string &path, const std::vector<Weight> &weights) {
    std::vector<magi2norm::safetensors::OutputTensor> tensors;
    for (const Weight &w : weights) {
        tensors.push_back({w.key, magi2norm::safetensors::dtype_tag(w.values.dtype()), w.values.shape(), w.values.data()});
    }
    magi2norm::safetensors::write(path, tensors);
}

class CheckpointTest : public testing::Test {
protected:
    ref::HostTensor weight(DType dtype, ref::Shape shape) { return contract::random_weight(dtype, shape, rng_); }

    cli_test::TempDir dir_;
    contract::Rng rng_{17};
};

TEST_F(CheckpointTest, LoadsEveryDtypeAndShapeWithMPDElements) {
    struct Case {
        const char *module;
        NormConfig config;
        ref::HostTensor values;
    };
    std::vector<Case> cases;
    cases.push_back({"a.pre_norm", {3072, 1e-6f, 3}, weight(DType::bf16, {3, 3072})});
    cases.push_back({"a.q_norm", {128}, weight(DType::f32, {128})});
    cases.push_back({"a.mhc_norm", {64, 1e-6f, 1, 4}, weight(DType::f16, {4, 64})});
    cases.push_back({"a.k_norm", {128, 1e-5f, 3, 2}, weight(DType::bf16, {3, 2, 128})});
    cases.push_back({"a.final_norm", {32, 1e-6f, 3, 2}, weight(DType::f32, {3 * 2 * 32})});
    cases.push_back({"a.odd_norm", {8, 1e-6f, 2, 3}, weight(DType::f16, {6, 2, 4})});
    std::vector<Weight> weights;
    for (const Case &c : cases) weights.push_back({std::string(c.module) + ".weight", c.values});
    write_checkpoint(dir_.file("model.safetensors"), weights);

    const Checkpoint checkpoint = Checkpoint::open(dir_.file("model.safetensors"));
    for (const Case &c : cases) {
        SCOPED_TRACE(c.module);
        const magi2norm::RMSNorm norm = checkpoint.load(c.module, c.config);
        EXPECT_EQ(norm.scale(), ref::scale_of(c.values.view()));
        EXPECT_EQ(norm.config().num_modality, c.config.num_modality);
        EXPECT_EQ(norm.config().eps, c.config.eps);
        const magi2norm::ConstTensorView view = checkpoint.weight(c.module, c.config);
        EXPECT_EQ(view.dtype, c.values.dtype());
        EXPECT_EQ(view.shape, c.values.shape());
    }
}

TEST_F(CheckpointTest, LoadedNormOutlivesTheCheckpoint) {
    const ref::HostTensor w = weight(DType::bf16, {256});
    write_checkpoint(dir_.file("model.safetensors"), {{"norm.weight", w}});
    std::optional<magi2norm::RMSNorm> norm;
    {
        const Checkpoint checkpoint = Checkpoint::open(dir_.file("model.safetensors"));
        norm = checkpoint.load("norm", {256});
    }
    EXPECT_EQ(norm->scale(), ref::scale_of(w.view()));
}

// A block's tensors: norms and other modules, and the same names one layer on.
class PrefixTest : public CheckpointTest {
protected:
    void SetUp() override {
        for (const char *layer : {"block.layers.1.", "block.layers.10."}) {
            const std::string p = layer;
            weights_.push_back({p + "attention.pre_norm.weight", weight(DType::bf16, {3, 96})});
            weights_.push_back({p + "attention.proj.weight", weight(DType::bf16, {8, 8})});
            weights_.push_back({p + "attention.q_norm.weight", weight(DType::f32, {16})});
            weights_.push_back({p + "mlp.pre_norm.weight", weight(DType::f16, {96})});
            weights_.push_back({p + "mlp.fc1.bias", weight(DType::f32, {8})});
        }
        write_checkpoint(dir_.file("model.safetensors"), weights_);
    }

    const ref::HostTensor &values(const std::string &key) const {
        for (const Weight &w : weights_) {
            if (w.key == key) return w.values;
        }
        throw std::out_of_range(key);
    }

    std::vector<Weight> weights_;
};

TEST_F(PrefixTest, LoadAllByFunctionPicksTheNormsUnderThePrefix) {
    const Checkpoint checkpoint = Checkpoint::open(dir_.file("model.safetensors"));
    std::vector<std::string> asked;
    const auto norms = checkpoint.load_all("block.layers.1.", [&](const std::string &module) -> std::optional<NormConfig> {
        asked.push_back(module);
        if (module == "attention.pre_norm") return NormConfig{96, 1e-6f, 3};
        if (module == "attention.q_norm") return NormConfig{16};
        if (module == "mlp.pre_norm") return NormConfig{96};
        return std::nullopt;
    });
    // Every ".weight" under the prefix, relative to it, and nothing of layer 10 or any bias.
    EXPECT_EQ(asked, (std::vector<std::string>{"attention.pre_norm", "attention.proj", "attention.q_norm", "mlp.pre_norm"}));
    ASSERT_EQ(norms.size(), 3u);
    EXPECT_EQ(norms.at("attention.pre_norm").scale(), ref::scale_of(values("block.layers.1.attention.pre_norm.weight").view()));
    EXPECT_EQ(norms.at("attention.q_norm").scale(), ref::scale_of(values("block.layers.1.attention.q_norm.weight").view()));
    EXPECT_EQ(norms.at("mlp.pre_norm").scale(), ref::scale_of(values("block.layers.1.mlp.pre_norm.weight").view()));
}

// Under the prefix "block.layers.1.attention.", the key "...attention.proj.weight" is module
// "proj"; under "block.layers.1.attention.proj." (or without the dot) the same key is that
// module's own weight, with no module name under the prefix: skipped, not loaded as "weight".
TEST_F(PrefixTest, AModulesOwnWeightIsNotAModuleUnderItsPrefix) {
    const Checkpoint checkpoint = Checkpoint::open(dir_.file("model.safetensors"));
    for (const char *prefix : {"block.layers.1.attention.proj.", "block.layers.1.attention.proj"}) {
        std::vector<std::string> asked;
        const auto norms = checkpoint.load_all(prefix, [&](const std::string &module) -> std::optional<NormConfig> {
            asked.push_back(module);
            return NormConfig{8};
        });
        EXPECT_TRUE(asked.empty()) << prefix << ": asked for '" << (asked.empty() ? "" : asked[0]) << "'";
        EXPECT_TRUE(norms.empty()) << prefix;
    }
}

TEST_F(PrefixTest, LoadAllByTable) {
    const Checkpoint checkpoint = Checkpoint::open(dir_.file("model.safetensors"));
    const auto norms = checkpoint.load_all("block.layers.10.", std::map<std::string, NormConfig>{
                                                                   {"attention.pre_norm", {96, 1e-6f, 3}},
                                                                   {"mlp.pre_norm", {96}},
                                                               });
    ASSERT_EQ(norms.size(), 2u);
    EXPECT_EQ(norms.at("mlp.pre_norm").scale(), ref::scale_of(values("block.layers.10.mlp.pre_norm.weight").view()));
    EXPECT_TRUE(throws_error(
        [&] { checkpoint.load_all("block.layers.10.", std::map<std::string, NormConfig>{{"attention.k_norm", {16}}}); },
        ErrorCode::weight, {"block.layers.10.attention.k_norm.weight"}));
}

TEST_F(PrefixTest, UnknownPrefixIsAnError) {
    const Checkpoint checkpoint = Checkpoint::open(dir_.file("model.safetensors"));
    EXPECT_TRUE(throws_error([&] { checkpoint.load_all("block.layer.1.", [](const std::string &) { return NormConfig{96}; }); },
                             ErrorCode::weight, {"block.layer.1."}));
}

TEST_F(CheckpointTest, WrongKeyShapeOrDtype) {
    const ref::HostTensor norm = weight(DType::bf16, {3, 128});
    const ref::HostTensor sixteen_bytes(DType::f32, {4});  // zeros, written as I32 and F64 tensors
    magi2norm::safetensors::write(dir_.file("model.safetensors"), {
                                                                      {"norm.weight", "BF16", {3, 128}, norm.data()},
                                                                      {"ids.weight", "I32", {4}, sixteen_bytes.data()},
                                                                      {"wide.weight", "F64", {2}, sixteen_bytes.data()},
                                                                  });
    const Checkpoint checkpoint = Checkpoint::open(dir_.file("model.safetensors"));

    EXPECT_TRUE(throws_error([&] { checkpoint.load("norm_x", {128, 1e-6f, 3}); }, ErrorCode::weight, {"'norm_x.weight'"}));
    EXPECT_TRUE(throws_error([&] { checkpoint.load("norm", {128}); }, ErrorCode::weight, {"[3, 128] (384 elements)"}));
    EXPECT_TRUE(throws_error([&] { checkpoint.load("norm", {128, 1e-6f, 1, 2}); }, ErrorCode::weight, {"num_patterns 2"}));
    EXPECT_TRUE(throws_error([&] { checkpoint.load("ids", {4}); }, ErrorCode::weight, {"dtype I32"}));
    EXPECT_TRUE(throws_error([&] { checkpoint.load("wide", {2}); }, ErrorCode::weight, {"dtype F64"}));
    EXPECT_TRUE(throws_error([&] { checkpoint.load("norm", {0, 1e-6f, 3}); }, ErrorCode::weight, {"384 elements"}));
    EXPECT_NO_THROW(checkpoint.load("norm", {128, 1e-6f, 3}));
}

TEST_F(CheckpointTest, FilesThatCannotBeRead) {
    EXPECT_TRUE(throws_error([&] { Checkpoint::open(dir_.file("missing.safetensors")); }, ErrorCode::io, {"cannot open"}));
    EXPECT_TRUE(throws_error([&] { Checkpoint::open(dir_.path().string()); }, ErrorCode::io, {"not a regular file"}));
}

// Hand-made bytes: each malformation is refused when the checkpoint is opened.
TEST_F(CheckpointTest, MalformedFiles) {
    const std::string entry = R"("n.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
    const std::string eight(8, '\0');
    struct Malformed {
        const char *what;
        std::string bytes;
        const char *word;
    };
    const std::vector<Malformed> cases = {
        {"shorter than the length field", std::string("\x10\0\0", 3), "shorter"},
        {"header length past the end", cli_test::safetensors_bytes(4096, "{" + entry + "}", eight), "exceeds the file size"},
        {"header length huge", cli_test::safetensors_bytes(~0ull, "{}", ""), "header length"},
        {"bad JSON", cli_test::safetensors_bytes("{" + entry, eight), "not valid JSON"},
        {"header not an object", cli_test::safetensors_bytes("[1, 2]", ""), "not a JSON object"},
        {"offsets past the data", cli_test::safetensors_bytes(R"({"n.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234"),
         "beyond the data section"},
        {"offsets reversed", cli_test::safetensors_bytes(R"({"n.weight":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight),
         "begin 8 > end 0"},
        {"offsets overlapping",
         cli_test::safetensors_bytes(R"({"a.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b.weight":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     eight + "1234"),
         "overlap"},
        {"shape and offsets disagree", cli_test::safetensors_bytes(R"({"n.weight":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
         "does not match"},
        {"unknown dtype", cli_test::safetensors_bytes(R"({"n.weight":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", eight),
         "unknown dtype"},
    };
    for (const Malformed &m : cases) {
        SCOPED_TRACE(m.what);
        const std::string path = dir_.file("bad.safetensors");
        cli_test::write_file(path, m.bytes);
        EXPECT_TRUE(throws_error([&] { Checkpoint::open(path); }, ErrorCode::format, {m.word}));
    }
}

// A good checkpoint cut short anywhere, in the header or in the data, no longer opens.
TEST_F(CheckpointTest, Truncated) {
    const std::string path = dir_.file("model.safetensors");
    write_checkpoint(path, {{"a.weight", weight(DType::bf16, {64})}, {"b.weight", weight(DType::f32, {32})}});
    const std::string whole = cli_test::read_file(path);
    for (std::size_t keep : {std::size_t{4}, std::size_t{20}, whole.size() / 2, whole.size() - 1}) {
        SCOPED_TRACE(keep);
        cli_test::write_file(path, whole.substr(0, keep));
        EXPECT_TRUE(throws_error([&] { Checkpoint::open(path); }, ErrorCode::format,
                                 {"shorter", "truncated", "not valid JSON", "beyond the data section"}));
    }
}

}  // namespace
