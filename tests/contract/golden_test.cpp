// SPEC.md's golden cases (PyTorch results of the formula), every file in MAGI2NORM_GOLDEN_DIR,
// run through the public API with the parameters of each file's __metadata__:
//   gate 1: the call's FP32 result against the file's y_f32;
//   gate 2: the call's BF16/FP16 output against the RNE cast of that FP32 result;
//   gate 3: the call's BF16/FP16 output against the file's y.
// The reference is held to the same files, so that its own agreement with PyTorch is on record.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "norm_case.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"
#include "reference/safetensors_file.hpp"

namespace contract {
namespace {

namespace fs = std::filesystem;

// MAGI2NORM_GOLDEN_DIR from the environment (a test binary carried to another machine), else the
// folder the build was configured with.
std::string golden_dir() {
    const char *dir = std::getenv("MAGI2NORM_GOLDEN_DIR");
    return dir ? dir : MAGI2NORM_GOLDEN_DIR;
}

std::vector<std::string> golden_files() {
    std::vector<std::string> files;
    if (!fs::is_directory(golden_dir())) return files;
    for (const fs::directory_entry &entry : fs::directory_iterator(golden_dir())) {
        if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::string file_name(const testing::TestParamInfo<std::string> &info) {
    std::string name = fs::path(info.param).stem().string();
    for (char &c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name;
}

DType dtype_of(const std::map<std::string, std::string> &metadata, const std::string &key) {
    const std::optional<DType> dtype = magi2norm::parse_dtype(metadata.at(key));
    if (!dtype) throw std::runtime_error("bad dtype in __metadata__." + key);
    return *dtype;
}

// A golden file read into a NormCase (x points into the case's own copy of the file's x), through
// the tests' own safetensors reader.
struct GoldenCase {
    ref::SafetensorsFile file;
    ref::HostTensor x, y, y_f32;
    NormCase norm;

    explicit GoldenCase(const std::string &path)
        : file(ref::SafetensorsFile::read(path)), x(file.tensor("x")), y(file.tensor("y")), y_f32(file.tensor("y_f32")) {
        const auto &meta = file.metadata();
        norm.config.dim = std::stoll(meta.at("dim"));
        norm.config.eps = std::stof(meta.at("eps"));
        norm.config.num_modality = std::stoll(meta.at("num_modality"));
        norm.config.num_patterns = std::stoll(meta.at("num_patterns"));
        norm.config.out_dtype = dtype_of(meta, "out_dtype");
        norm.x = x.view();
        norm.weight = file.tensor("weight");
        const std::string &grouping = meta.at("grouping");
        const std::int64_t M = norm.config.num_modality;
        if (grouping == "ids") {
            norm.grouping = GroupingSpec::by_ids(file.int32s("modality"), M);
        } else if (grouping == "sizes") {
            const std::vector<std::int32_t> sizes = file.int32s("group_sizes");
            norm.grouping = GroupingSpec::by_sizes({sizes.begin(), sizes.end()});
        } else if (grouping != "none") {
            throw std::runtime_error("unknown grouping " + grouping);
        }
        // The metadata and the tensors must tell one story.
        EXPECT_EQ(x.dtype(), dtype_of(meta, "in_dtype"));
        EXPECT_EQ(norm.weight.dtype(), dtype_of(meta, "weight_dtype"));
        EXPECT_EQ(y.dtype(), *norm.config.out_dtype);
    }
};

TEST(Golden, DirectoryHasCases) {
    EXPECT_FALSE(golden_files().empty()) << "no .safetensors files in " << golden_dir();
}

class Golden : public testing::TestWithParam<std::string> {};

TEST_P(Golden, LibraryPassesThreeGates) {
    const GoldenCase golden(GetParam());
    SCOPED_TRACE(golden.norm.describe());
    const ref::HostTensor out = run_library(golden.norm);
    const ref::HostTensor own_f32 = run_library(golden.norm, DType::f32);

    EXPECT_TRUE(ref::gate1_close(own_f32.view(), golden.y_f32.view()));
    if (out.dtype() == DType::f32) {
        EXPECT_TRUE(ref::gate1_close(out.view(), golden.y.view()));
    } else {
        EXPECT_TRUE(ref::gate2_cast_of_own_f32(out.view(), own_f32.view()));
        EXPECT_TRUE(ref::gate3_within_local_ulp(out.view(), golden.y.view()));
    }
}

TEST_P(Golden, ReferenceAgreesWithPyTorch) {
    const GoldenCase golden(GetParam());
    SCOPED_TRACE(golden.norm.describe());
    const ref::HostTensor y32 = run_reference(golden.norm);
    EXPECT_TRUE(ref::gate1_close(y32.view(), golden.y_f32.view()));
    if (golden.y.dtype() != DType::f32) {
        EXPECT_TRUE(ref::gate3_within_local_ulp(y32.cast(golden.y.dtype()).view(), golden.y.view()));
    }
}

INSTANTIATE_TEST_SUITE_P(Files, Golden, testing::ValuesIn(golden_files()), file_name);
// An empty directory is reported by DirectoryHasCases, not as an uninstantiated suite.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Golden);

}  // namespace
}  // namespace contract
