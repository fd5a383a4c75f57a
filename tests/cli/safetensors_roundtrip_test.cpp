// Writing and reading back safetensors files: names, order, dtypes, shapes, bytes, metadata,
// views, and the layout details other readers rely on (padding, empty tensors, alignment).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "magi2norm/safetensors.hpp"
#include "reference/safetensors_file.hpp"
#include "test_files.hpp"

namespace st = magi2norm::safetensors;
using magi2norm::DType;
using magi2norm::Error;
using magi2norm::ErrorCode;

namespace {

TEST(SafetensorsRoundTrip, TensorsMetadataAndOrderSurvive) {
    cli_test::TempDir dir;
    const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
    const std::vector<std::uint16_t> b = {0x3f80, 0xbf80, 0x7fc0};
    const std::vector<std::int32_t> ids = {2, 0, 1, 1};
    const std::vector<std::int64_t> sizes = {5, 0, 1ll << 40};
    const std::string path = dir.file("round_trip.safetensors");
    // Deliberately not in alphabetical order: the file keeps the order it was given.
    st::write(path,
              {{"zeta", "F32", {2, 3}, a.data()},
               {"alpha", "BF16", {3}, b.data()},
               {"ids", "I32", {4}, ids.data()},
               {"empty", "F16", {0, 8}, nullptr},
               {"sizes", "I64", {3}, sizes.data()}},
              {{"dim", "3"}, {"note", "ünïcode ok"}});

    const st::File file = st::File::open(path);
    EXPECT_EQ(file.path(), path);
    EXPECT_EQ(file.names(), (std::vector<std::string>{"zeta", "alpha", "ids", "empty", "sizes"}));
    EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"dim", "3"}, {"note", "ünïcode ok"}}));
    EXPECT_TRUE(file.contains("ids"));
    EXPECT_FALSE(file.contains("missing"));

    const st::TensorInfo &zeta = file.tensor("zeta");
    EXPECT_EQ(zeta.dtype, "F32");
    EXPECT_EQ(zeta.shape, (std::vector<std::int64_t>{2, 3}));
    ASSERT_EQ(zeta.nbytes, a.size() * 4);
    EXPECT_EQ(std::memcmp(zeta.data, a.data(), zeta.nbytes), 0);
    EXPECT_EQ(std::memcmp(file.tensor("alpha").data, b.data(), 6), 0);
    EXPECT_EQ(std::memcmp(file.tensor("ids").data, ids.data(), 16), 0);
    EXPECT_EQ(std::memcmp(file.tensor("sizes").data, sizes.data(), 24), 0);
    EXPECT_EQ(file.tensor("empty").nbytes, 0u);
    EXPECT_EQ(file.tensor("empty").shape, (std::vector<std::int64_t>{0, 8}));

    const magi2norm::ConstTensorView view = file.view("alpha");
    EXPECT_EQ(view.dtype, DType::bf16);
    EXPECT_EQ(view.shape, (std::vector<std::int64_t>{3}));
    EXPECT_TRUE(view.strides.empty());
    EXPECT_EQ(view.data, file.tensor("alpha").data);
    EXPECT_EQ(file.view("empty").dtype, DType::f16);
}

// The tests' own reader (tests/reference, no library code) reads what the library writes: names,
// dtypes, shapes, bytes and metadata. A writer bug mirrored by the library's reader shows here.
TEST(SafetensorsRoundTrip, AnIndependentReaderReadsWhatTheLibraryWrites) {
    cli_test::TempDir dir;
    const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
    const std::vector<std::uint16_t> b = {0x3f80, 0xbf80, 0x7fc0}, c = {0x3c00, 0x7bff, 0x0001, 0x8000};
    const std::vector<std::int32_t> ids = {2, 0, 1};
    const std::string path = dir.file("independent.safetensors");
    st::write(path, {{"zeta", "F32", {2, 3}, a.data()}, {"alpha", "BF16", {3}, b.data()}, {"half", "F16", {2, 2}, c.data()},
                     {"ids", "I32", {3}, ids.data()}, {"empty", "F32", {0, 4}, nullptr}},
              {{"dim", "3"}});

    const ref::SafetensorsFile file = ref::SafetensorsFile::read(path);
    EXPECT_EQ(file.names(), (std::vector<std::string>{"alpha", "empty", "half", "ids", "zeta"}));
    EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"dim", "3"}}));
    const ref::HostTensor zeta = file.tensor("zeta"), alpha = file.tensor("alpha"), half = file.tensor("half");
    EXPECT_EQ(zeta.dtype(), DType::f32);
    EXPECT_EQ(zeta.shape(), (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(std::memcmp(zeta.data(), a.data(), a.size() * 4), 0);
    EXPECT_EQ(alpha.dtype(), DType::bf16);
    EXPECT_EQ(std::memcmp(alpha.data(), b.data(), b.size() * 2), 0);
    EXPECT_EQ(half.dtype(), DType::f16);
    EXPECT_EQ(half.shape(), (std::vector<std::int64_t>{2, 2}));
    EXPECT_EQ(std::memcmp(half.data(), c.data(), c.size() * 2), 0);
    EXPECT_EQ(file.int32s("ids"), ids);
    EXPECT_EQ(file.tensor("empty").size(), 0);
}

// Both readers see the same golden files: the contract suites read them with the tests' reader,
// the tool with the library's.
TEST(SafetensorsRoundTrip, BothReadersReadTheGoldenFilesAlike) {
    ASSERT_FALSE(cli_test::golden_names().empty()) << "no golden files in " << MAGI2NORM_GOLDEN_DIR;
    for (const std::string &stem : cli_test::golden_names()) {
        const std::string path = cli_test::golden_path(stem);
        SCOPED_TRACE(path);
        const st::File library = st::File::open(path);
        const ref::SafetensorsFile own = ref::SafetensorsFile::read(path);
        EXPECT_EQ(own.metadata(), library.metadata());
        std::vector<std::string> names = library.names();
        std::sort(names.begin(), names.end());
        ASSERT_EQ(own.names(), names);
        for (const std::string &name : names) {
            const st::TensorInfo &t = library.tensor(name);
            if (t.dtype == "I32") {
                const std::vector<std::int32_t> values = own.int32s(name);
                ASSERT_EQ(values.size() * 4, t.nbytes) << name;
                EXPECT_EQ(std::memcmp(values.data(), t.data, t.nbytes), 0) << name;
                continue;
            }
            const ref::HostTensor tensor = own.tensor(name);
            EXPECT_EQ(tensor.shape(), t.shape) << name;
            EXPECT_EQ(tensor.dtype(), library.view(name).dtype) << name;
            ASSERT_EQ(tensor.bytes().size(), t.nbytes) << name;
            EXPECT_EQ(std::memcmp(tensor.data(), t.data, t.nbytes), 0) << name;
        }
    }
}

TEST(SafetensorsRoundTrip, HeaderIsPaddedToEightBytes) {
    cli_test::TempDir dir;
    const float one = 1.0f;
    for (const std::string name : {"a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh"}) {
        const std::string path = dir.file(name + ".safetensors");
        st::write(path, {{name, "F32", {1}, &one}});
        const std::string bytes = cli_test::read_file(path);
        std::uint64_t header_length = 0;
        for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | static_cast<unsigned char>(bytes[i]);
        EXPECT_EQ(header_length % 8, 0u) << name;
        EXPECT_EQ(bytes.size(), 8 + header_length + 4) << name;
        EXPECT_EQ(bytes.find('{'), 8u) << "the header is plain JSON";
        EXPECT_EQ(st::File::open(path).names(), std::vector<std::string>{name});
    }
}

TEST(SafetensorsRoundTrip, NoTensorsAndEmptyDataSection) {
    cli_test::TempDir dir;
    const std::string path = dir.file("empty.safetensors");
    st::write(path, {}, {{"k", "v"}});
    const st::File file = st::File::open(path);
    EXPECT_TRUE(file.names().empty());
    EXPECT_EQ(file.metadata().at("k"), "v");

    // Only zero-byte tensors: a file ending right after its header.
    cli_test::write_file(path, cli_test::safetensors_bytes(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})"));
    EXPECT_EQ(st::File::open(path).tensor("e").nbytes, 0u);
}

TEST(SafetensorsRoundTrip, MisalignedDataIsReadAligned) {
    // A header of 8k + 1 bytes puts the data at an odd offset: the reader must still hand out aligned floats.
    cli_test::TempDir dir;
    const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    std::string padded = header;
    while ((8 + padded.size()) % 8 != 1) padded += ' ';
    const float values[2] = {3.5f, -1.25f};
    const std::string data(reinterpret_cast<const char *>(values), sizeof values);
    const std::string path = dir.file("misaligned.safetensors");
    cli_test::write_file(path, cli_test::safetensors_bytes(padded, data));

    const st::File file = st::File::open(path);
    const auto *x = static_cast<const float *>(file.view("x").data);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x) % alignof(float), 0u);
    EXPECT_EQ(x[0], 3.5f);
    EXPECT_EQ(x[1], -1.25f);
}

TEST(SafetensorsRoundTrip, OtherDtypesHaveNoView) {
    cli_test::TempDir dir;
    const std::vector<std::int32_t> ids = {1, 2};
    const std::string path = dir.file("ids.safetensors");
    st::write(path, {{"ids", "I32", {2}, ids.data()}});
    try {
        st::File::open(path).view("ids");
        FAIL() << "view of I32 did not throw";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ErrorCode::dtype);
        EXPECT_NE(std::string(e.what()).find("I32"), std::string::npos) << e.what();
    }
}

TEST(SafetensorsRoundTrip, DtypeTags) {
    EXPECT_STREQ(st::dtype_tag(DType::f32), "F32");
    EXPECT_STREQ(st::dtype_tag(DType::bf16), "BF16");
    EXPECT_STREQ(st::dtype_tag(DType::f16), "F16");
    EXPECT_EQ(st::dtype_from_tag("BF16"), DType::bf16);
    EXPECT_EQ(st::dtype_from_tag("I32"), std::nullopt);
    EXPECT_EQ(st::dtype_from_tag("bf16"), std::nullopt) << "tags are case-sensitive";
    const std::map<std::string, std::size_t> sizes = {{"F64", 8}, {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"I64", 8},
                                                      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},  {"BOOL", 1}};
    for (const auto &[tag, size] : sizes) EXPECT_EQ(st::tag_size(tag), size) << tag;
    EXPECT_EQ(st::tag_size("F128"), 0u);
}

TEST(SafetensorsWrite, FailuresAreIoErrorsAndLeaveNoFile) {
    cli_test::TempDir dir;
    const float one = 1.0f;
    const std::string path = dir.file("no/such/dir/out.safetensors");
    try {
        st::write(path, {{"x", "F32", {1}, &one}});
        FAIL() << "write into a missing directory did not throw";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ErrorCode::io);
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// An existing output is replaced in place: through a symlink to the file it names, keeping the
// file's permissions. A directory or an empty path is refused with a message that says so.
TEST(SafetensorsWrite, ReplacesThroughSymlinksKeepingPermissions) {
    cli_test::TempDir dir;
    const float one = 1.0f;
    std::filesystem::create_directory(dir.path() / "real");
    const std::string target = dir.file("real/target.safetensors"), link = dir.file("link.safetensors");
    cli_test::write_file(target, "old");
    std::filesystem::permissions(target, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::filesystem::create_symlink("real/target.safetensors", link);

    st::write(link, {{"x", "F32", {1}, &one}});
    EXPECT_TRUE(std::filesystem::is_symlink(link)) << "the link was replaced by a file";
    EXPECT_EQ(st::File::open(target).names(), std::vector<std::string>{"x"});
    EXPECT_EQ(std::filesystem::status(target).permissions(),
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path() / "real"), {}), 1) << "a temporary file was left";
}

TEST(SafetensorsWrite, DirectoriesAndEmptyPathsAreRefused) {
    cli_test::TempDir dir;
    const float one = 1.0f;
    for (const std::string &path : {dir.path().string(), dir.path().string() + "/", std::string()}) {
        try {
            st::write(path, {{"x", "F32", {1}, &one}});
            ADD_FAILURE() << "write to '" << path << "' did not throw";
        } catch (const Error &e) {
            EXPECT_EQ(e.code(), ErrorCode::io);
            const std::string what = e.what();
            EXPECT_TRUE(what.find("directory") != std::string::npos || what.find("empty") != std::string::npos) << what;
            EXPECT_EQ(what.find(".tmp."), std::string::npos) << "names the temporary file: " << what;
        }
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsWrite, RefusesWhatWouldBeMalformed) {
    cli_test::TempDir dir;
    const float one = 1.0f;
    const std::string path = dir.file("out.safetensors");
    const auto code_of = [&](const std::vector<st::OutputTensor> &tensors) {
        try {
            st::write(path, tensors);
        } catch (const Error &e) {
            return e.code();
        }
        ADD_FAILURE() << "write did not throw";
        return ErrorCode::io;
    };
    EXPECT_EQ(code_of({{"x", "F32", {1}, &one}, {"x", "F32", {1}, &one}}), ErrorCode::format);
    EXPECT_EQ(code_of({{"x", "Q4", {1}, &one}}), ErrorCode::dtype);
    EXPECT_EQ(code_of({{"x", "F32", {-1}, &one}}), ErrorCode::shape);
    EXPECT_EQ(code_of({{"x", "F32", {1}, nullptr}}), ErrorCode::null_data);
    EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
