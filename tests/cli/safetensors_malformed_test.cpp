// Malformed safetensors files, written byte by byte: each must be refused with Error(format)
// naming the file and the problem, and no input at all may crash the reader.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "magi2norm/safetensors.hpp"
#include "test_files.hpp"

namespace st = magi2norm::safetensors;
using magi2norm::Error;
using magi2norm::ErrorCode;

namespace {

struct Malformed {
    const char *name;
    std::string bytes;
    const char *problem;  // a part of the message that names the problem
};

std::string entry(const std::string &dtype, const std::string &shape, const std::string &offsets) {
    return R"({"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" + offsets + "}";
}

std::string header_of(const std::string &body) { return "{" + body + "}"; }

const std::string kEightBytes(8, '\x11');

std::vector<Malformed> malformed_files() {
    using cli_test::safetensors_bytes;
    const std::string f32x2 = entry(R"("F32")", "[2]", "[0,8]");
    return {
        {"empty_file", "", "shorter than the 8-byte header length"},
        {"seven_bytes", std::string(7, '\0'), "shorter than the 8-byte header length"},
        {"truncated_header", safetensors_bytes(200, header_of(R"("x":)" + f32x2), ""), "exceeds the file size"},
        {"absurd_header_length", safetensors_bytes(1ull << 40, "{}", ""), "exceeds the 100 MiB limit"},
        {"bad_json", safetensors_bytes(R"({"x": {"dtype": "F32",)"), "not valid JSON"},
        {"invalid_utf8", safetensors_bytes("{\"\xff\":{}}"), "not valid JSON"},
        {"header_not_object", safetensors_bytes("[1,2]"), "header is not a JSON object"},
        {"entry_not_object", safetensors_bytes(header_of(R"("x":5)")), "entry is not a JSON object"},
        {"missing_dtype", safetensors_bytes(header_of(R"("x":{"shape":[2],"data_offsets":[0,8]})"), kEightBytes),
         "missing dtype"},
        {"missing_shape", safetensors_bytes(header_of(R"("x":{"dtype":"F32","data_offsets":[0,8]})"), kEightBytes),
         "missing shape"},
        {"missing_data_offsets", safetensors_bytes(header_of(R"("x":{"dtype":"F32","shape":[2]})"), kEightBytes),
         "missing data_offsets"},
        {"dtype_not_string", safetensors_bytes(header_of(R"("x":)" + entry("4", "[2]", "[0,8]")), kEightBytes),
         "dtype is not a string"},
        {"unknown_dtype", safetensors_bytes(header_of(R"("x":)" + entry(R"("Q4")", "[2]", "[0,8]")), kEightBytes),
         "unknown dtype 'Q4'"},
        {"shape_not_array", safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", R"("2")", "[0,8]")), kEightBytes),
         "shape is not an array"},
        {"shape_float", safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[2.0]", "[0,8]")), kEightBytes),
         "is not an integer"},
        {"negative_dim", safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[-2]", "[0,8]")), kEightBytes),
         "negative dimension"},
        {"offsets_one_number", safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[2]", "[8]")), kEightBytes),
         "data_offsets is not an array of two integers"},
        {"offsets_negative", safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[2]", "[-8,0]")), kEightBytes),
         "data_offsets are not non-negative integers"},
        {"offsets_past_int64",
         safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[2]", "[0,18446744073709551615]")), kEightBytes),
         "data_offsets are not non-negative integers"},
        {"shape_bytes_mismatch", safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[3]", "[0,8]")), kEightBytes),
         "does not match"},
        {"shape_bytes_overflow",
         safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[4611686018427387904,4]", "[0,8]")), kEightBytes),
         "does not match"},
        {"begin_after_end", safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[0]", "[8,4]")), kEightBytes),
         "begin 8 > end 4"},
        {"offsets_out_of_range", safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[4]", "[0,16]")), kEightBytes),
         "beyond the data section"},
        {"truncated_data", safetensors_bytes(header_of(R"("x":)" + f32x2), "\x01\x02\x03"), "beyond the data section"},
        {"overlapping",
         safetensors_bytes(header_of(R"("a":)" + entry(R"("F32")", "[2]", "[0,8]") + R"(,"b":)" +
                                     entry(R"("F32")", "[2]", "[4,12]")),
                           kEightBytes + "1234"),
         "overlap"},
        {"overlapping_out_of_order",
         safetensors_bytes(header_of(R"("b":)" + entry(R"("I8")", "[1]", "[7,8]") + R"(,"a":)" +
                                     entry(R"("F32")", "[2]", "[0,8]")),
                           kEightBytes),
         "overlap"},
        {"duplicate_tensor", safetensors_bytes(header_of(R"("x":)" + f32x2 + R"(,"x":)" + f32x2), kEightBytes), "twice"},
        {"metadata_not_object", safetensors_bytes(header_of(R"("__metadata__":["a"])")), "__metadata__ is not a JSON object"},
        {"metadata_value_not_string", safetensors_bytes(header_of(R"("__metadata__":{"dim":64})")),
         "__metadata__ value of 'dim' is not a string"},
    };
}

class SafetensorsMalformed : public testing::TestWithParam<Malformed> {};

TEST_P(SafetensorsMalformed, IsAFormatErrorNamingFileAndProblem) {
    cli_test::TempDir dir;
    const std::string path = dir.file(std::string(GetParam().name) + ".safetensors");
    cli_test::write_file(path, GetParam().bytes);
    try {
        st::File::open(path);
        FAIL() << "opened without an error";
    } catch (const Error &e) {
        const std::string message = e.what();
        EXPECT_EQ(e.code(), ErrorCode::format) << message;
        EXPECT_NE(message.find(path), std::string::npos) << message;
        EXPECT_NE(message.find(GetParam().problem), std::string::npos) << message;
    }
}

INSTANTIATE_TEST_SUITE_P(Files, SafetensorsMalformed, testing::ValuesIn(malformed_files()),
                         [](const testing::TestParamInfo<Malformed> &param_info) { return std::string(param_info.param.name); });

TEST(SafetensorsErrors, MissingTensorIsNamed) {
    cli_test::TempDir dir;
    const std::string path = dir.file("one.safetensors");
    cli_test::write_file(path, cli_test::safetensors_bytes(header_of(R"("x":)" + entry(R"("F32")", "[2]", "[0,8]")), kEightBytes));
    const st::File file = st::File::open(path);
    for (const auto &call : {+[](const st::File &f) { f.tensor("weight"); }, +[](const st::File &f) { f.view("weight"); }}) {
        try {
            call(file);
            ADD_FAILURE() << "a missing tensor did not throw";
        } catch (const Error &e) {
            EXPECT_EQ(e.code(), ErrorCode::format);
            EXPECT_NE(std::string(e.what()).find("no tensor named 'weight'"), std::string::npos) << e.what();
        }
    }
}

TEST(SafetensorsErrors, UnreadablePathsAreIoErrors) {
    cli_test::TempDir dir;
    for (const std::string &path : {dir.file("does-not-exist.safetensors"), dir.path().string()}) {
        try {
            st::File::open(path);
            ADD_FAILURE() << path << " opened";
        } catch (const Error &e) {
            EXPECT_EQ(e.code(), ErrorCode::io) << e.what();
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        }
    }
}

// Every prefix of a valid file, and every single-byte change of its header, must either open or
// throw magi2norm::Error; anything else (a crash, another exception) fails the test.
class SafetensorsDamaged : public testing::Test {
protected:
    void SetUp() override {
        const float data[4] = {1, 2, 3, 4};
        st::write(original_, {{"x", "F32", {2, 2}, data}, {"ids", "I32", {2}, data}}, {{"dim", "2"}});
        bytes_ = cli_test::read_file(original_);
    }

    // True when the bytes open; false when they are refused with a magi2norm::Error.
    bool opens(const std::string &bytes) {
        cli_test::write_file(damaged_, bytes);
        try {
            const st::File file = st::File::open(damaged_);
            for (const std::string &name : file.names()) {
                const st::TensorInfo &t = file.tensor(name);
                // Touch every byte the reader vouches for (ASan/valgrind would catch a bad one).
                volatile unsigned char sum = 0;
                for (std::size_t i = 0; i < t.nbytes; ++i) sum = sum + static_cast<const unsigned char *>(t.data)[i];
            }
            return true;
        } catch (const Error &e) {
            EXPECT_EQ(e.code(), ErrorCode::format) << e.what();
            return false;
        }
    }

    cli_test::TempDir dir_;
    std::string original_ = dir_.file("original.safetensors"), damaged_ = dir_.file("damaged.safetensors");
    std::string bytes_;
};

TEST_F(SafetensorsDamaged, EveryTruncationIsRefused) {
    for (std::size_t size = 0; size < bytes_.size(); ++size) {
        EXPECT_FALSE(opens(bytes_.substr(0, size))) << "prefix of " << size << " bytes";
    }
    EXPECT_TRUE(opens(bytes_));
}

TEST_F(SafetensorsDamaged, EveryHeaderByteChangeOpensOrIsRefused) {
    for (std::size_t i = 0; i < bytes_.size() - 24; ++i) {
        for (const unsigned char value : {0x00, 0x22, 0x30, 0x5b, 0x7d, 0xff}) {  // NUL " 0 [ } and non-UTF-8
            std::string damaged = bytes_;
            damaged[i] = static_cast<char>(value);
            opens(damaged);
        }
    }
}

}  // namespace
