// Safetensors files: memory-mapped, validated reading and atomic writing.
//
// The reader trusts nothing in the file: every length, offset and shape is checked against the
// mapping before a pointer into it is handed out, so a malformed or hostile file yields an
// Error(format) and never an out-of-bounds read.
#include "magi2norm/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace magi2norm::safetensors {
namespace {

// ordered_json keeps the header's key order, which is the "file order" of names().
using Json = nlohmann::ordered_json;

// Bigger headers are not produced by any writer; refusing them bounds the parser's memory.
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

const std::map<std::string, std::size_t> &tag_sizes() {
    static const std::map<std::string, std::size_t> sizes = {
        {"F64", 8}, {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"I64", 8},
        {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},  {"BOOL", 1}};
    return sizes;
}

[[noreturn]] void fail(ErrorCode code, const std::string &path, const std::string &problem) {
    throw Error(code, path + ": " + problem);
}

std::string system_error_text() { return std::strerror(errno); }

// A read-only mapping of a whole file, unmapped on destruction.
class Mapping {
public:
    Mapping() = default;
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
    ~Mapping() {
        if (base_ != nullptr) munmap(base_, size_);
    }

    void map(const std::string &path) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail(ErrorCode::io, path, "cannot open: " + system_error_text());
        struct stat st {};
        if (fstat(fd, &st) != 0) {
            const std::string why = system_error_text();
            ::close(fd);
            fail(ErrorCode::io, path, "cannot stat: " + why);
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd);
            fail(ErrorCode::io, path, "not a regular file");
        }
        size_ = static_cast<std::size_t>(st.st_size);
        if (size_ > 0) {
            void *base = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (base == MAP_FAILED) {
                const std::string why = system_error_text();
                ::close(fd);
                fail(ErrorCode::io, path, "cannot map: " + why);
            }
            base_ = base;
        }
        ::close(fd);  // the mapping stays valid without the descriptor
    }

    const unsigned char *bytes() const { return static_cast<const unsigned char *>(base_); }
    std::size_t size() const { return size_; }

private:
    void *base_ = nullptr;
    std::size_t size_ = 0;
};

std::uint64_t read_u64_le(const unsigned char *p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// Parses the header, refusing duplicate keys at any depth: nlohmann would silently keep one of
// them, and a file naming a tensor twice is ambiguous.
Json parse_header(const std::string &path, const char *begin, const char *end) {
    std::vector<std::set<std::string>> open_objects;
    std::optional<std::string> duplicate;
    auto callback = [&](int, Json::parse_event_t event, Json &parsed) {
        using Event = Json::parse_event_t;
        if (event == Event::object_start) {
            open_objects.emplace_back();
        } else if (event == Event::object_end) {
            open_objects.pop_back();
        } else if (event == Event::key && !duplicate) {
            const std::string &key = parsed.get_ref<const std::string &>();
            if (!open_objects.back().insert(key).second) duplicate = key;
        }
        return true;
    };
    Json header;
    try {
        header = Json::parse(begin, end, callback);
    } catch (const Json::exception &e) {
        fail(ErrorCode::format, path, std::string("header is not valid JSON: ") + e.what());
    }
    if (duplicate) fail(ErrorCode::format, path, "header has the key '" + *duplicate + "' twice");
    if (!header.is_object()) fail(ErrorCode::format, path, "header is not a JSON object");
    return header;
}

// A JSON integer in [0, INT64_MAX], or nullopt for anything else (floats, negatives, strings).
std::optional<std::int64_t> non_negative_integer(const Json &j) {
    if (j.is_number_unsigned()) {
        const auto v = j.get<std::uint64_t>();
        if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
        return static_cast<std::int64_t>(v);
    }
    if (j.is_number_integer()) {
        const auto v = j.get<std::int64_t>();
        if (v < 0) return std::nullopt;
        return v;
    }
    return std::nullopt;
}

std::map<std::string, std::string> parse_metadata(const std::string &path, const Json &j) {
    if (!j.is_object()) fail(ErrorCode::format, path, "__metadata__ is not a JSON object");
    std::map<std::string, std::string> metadata;
    for (const auto &[key, value] : j.items()) {
        if (!value.is_string()) fail(ErrorCode::format, path, "__metadata__ value of '" + key + "' is not a string");
        metadata.emplace(key, value.get<std::string>());
    }
    return metadata;
}

struct Entry {
    TensorInfo info;
    std::uint64_t begin = 0, end = 0;  // within the data section
};

Entry parse_entry(const std::string &path, const std::string &name, const Json &j, std::uint64_t data_size) {
    const std::string where = "tensor '" + name + "': ";
    if (!j.is_object()) fail(ErrorCode::format, path, where + "entry is not a JSON object");
    for (const char *key : {"dtype", "shape", "data_offsets"}) {
        if (!j.contains(key)) fail(ErrorCode::format, path, where + "missing " + key);
    }
    Entry e;
    e.info.name = name;

    const Json &dtype = j.at("dtype");
    if (!dtype.is_string()) fail(ErrorCode::format, path, where + "dtype is not a string");
    e.info.dtype = dtype.get<std::string>();
    const std::size_t element_size = tag_size(e.info.dtype);
    if (element_size == 0) fail(ErrorCode::format, path, where + "unknown dtype '" + e.info.dtype + "'");

    const Json &shape = j.at("shape");
    if (!shape.is_array()) fail(ErrorCode::format, path, where + "shape is not an array");
    std::uint64_t bytes = element_size;
    bool bytes_overflow = false;
    for (const Json &dim : shape) {
        if (dim.is_number_integer() && !dim.is_number_unsigned() && dim.get<std::int64_t>() < 0) {
            fail(ErrorCode::format, path, where + "negative dimension " + dim.dump() + " in shape");
        }
        const auto extent = non_negative_integer(dim);
        if (!extent) fail(ErrorCode::format, path, where + "shape entry " + dim.dump() + " is not an integer");
        e.info.shape.push_back(*extent);
        bytes_overflow |= __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(*extent), &bytes);
    }

    const Json &offsets = j.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2) {
        fail(ErrorCode::format, path, where + "data_offsets is not an array of two integers");
    }
    const auto begin = non_negative_integer(offsets[0]), end = non_negative_integer(offsets[1]);
    if (!begin || !end) fail(ErrorCode::format, path, where + "data_offsets are not non-negative integers");
    e.begin = static_cast<std::uint64_t>(*begin);
    e.end = static_cast<std::uint64_t>(*end);
    if (e.begin > e.end) {
        fail(ErrorCode::format, path, where + "data_offsets begin " + std::to_string(e.begin) + " > end " + std::to_string(e.end));
    }
    if (e.end > data_size) {
        fail(ErrorCode::format, path, where + "data_offsets end " + std::to_string(e.end) + " beyond the data section of " +
                                          std::to_string(data_size) + " bytes");
    }
    if (bytes_overflow || bytes != e.end - e.begin) {
        fail(ErrorCode::format, path, where + "shape " + shape.dump() + " of " + e.info.dtype + " does not match the " +
                                          std::to_string(e.end - e.begin) + " bytes of data_offsets");
    }
    e.info.nbytes = static_cast<std::size_t>(bytes);
    return e;
}

// Tensors may come in any order in the header, but no two may share bytes.
void check_no_overlap(const std::string &path, std::vector<const Entry *> entries) {
    std::sort(entries.begin(), entries.end(), [](const Entry *a, const Entry *b) {
        return std::make_pair(a->begin, a->end) < std::make_pair(b->begin, b->end);
    });
    for (std::size_t i = 1; i < entries.size(); ++i) {
        const Entry &prev = *entries[i - 1], &cur = *entries[i];
        if (cur.begin < prev.end) {
            fail(ErrorCode::format, path, "tensors '" + prev.info.name + "' and '" + cur.info.name + "' overlap in data_offsets");
        }
    }
}

}  // namespace

struct File::Impl {
    std::string path;
    Mapping mapping;
    std::map<std::string, std::string> metadata;
    std::vector<TensorInfo> tensors;  // in file order
    std::map<std::string, std::size_t> index;
    // Copies of tensors whose bytes in the mapping are not aligned to their element size (the
    // format does not promise alignment, and typed access to misaligned data is undefined).
    std::vector<std::unique_ptr<std::max_align_t[]>> aligned_copies;
};

File File::open(const std::string &path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->mapping.map(path);
    const unsigned char *bytes = impl->mapping.bytes();
    const std::uint64_t file_size = impl->mapping.size();

    if (file_size < 8) fail(ErrorCode::format, path, "file of " + std::to_string(file_size) + " bytes is shorter than the 8-byte header length");
    const std::uint64_t header_size = read_u64_le(bytes);
    if (header_size > kMaxHeaderBytes) fail(ErrorCode::format, path, "header length " + std::to_string(header_size) + " exceeds the 100 MiB limit");
    if (header_size > file_size - 8) {
        fail(ErrorCode::format, path, "header length " + std::to_string(header_size) + " exceeds the file size of " + std::to_string(file_size) + " bytes (truncated header)");
    }
    const char *header_begin = reinterpret_cast<const char *>(bytes + 8);
    const Json header = parse_header(path, header_begin, header_begin + header_size);

    const std::uint64_t data_start = 8 + header_size;
    const std::uint64_t data_size = file_size - data_start;
    std::vector<Entry> entries;
    for (const auto &[name, value] : header.items()) {
        if (name == "__metadata__") {
            impl->metadata = parse_metadata(path, value);
        } else {
            entries.push_back(parse_entry(path, name, value, data_size));
        }
    }
    std::vector<const Entry *> by_offset;
    for (const Entry &e : entries) by_offset.push_back(&e);
    check_no_overlap(path, std::move(by_offset));

    for (Entry &e : entries) {
        const unsigned char *data = bytes + data_start + e.begin;
        const std::size_t element_size = tag_size(e.info.dtype);
        if (e.info.nbytes > 0 && reinterpret_cast<std::uintptr_t>(data) % element_size != 0) {
            const std::size_t words = (e.info.nbytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
            impl->aligned_copies.emplace_back(new std::max_align_t[words]);
            std::memcpy(impl->aligned_copies.back().get(), data, e.info.nbytes);
            data = reinterpret_cast<const unsigned char *>(impl->aligned_copies.back().get());
        }
        e.info.data = data;
        impl->index.emplace(e.info.name, impl->tensors.size());
        impl->tensors.push_back(std::move(e.info));
    }
    return File(std::move(impl));
}

File::File(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
File::File(File &&) noexcept = default;
File &File::operator=(File &&) noexcept = default;
File::~File() = default;

const std::string &File::path() const { return impl_->path; }
const std::map<std::string, std::string> &File::metadata() const { return impl_->metadata; }

std::vector<std::string> File::names() const {
    std::vector<std::string> names;
    names.reserve(impl_->tensors.size());
    for (const TensorInfo &t : impl_->tensors) names.push_back(t.name);
    return names;
}

bool File::contains(const std::string &name) const { return impl_->index.count(name) != 0; }

const TensorInfo &File::tensor(const std::string &name) const {
    const auto it = impl_->index.find(name);
    if (it == impl_->index.end()) fail(ErrorCode::format, impl_->path, "no tensor named '" + name + "'");
    return impl_->tensors[it->second];
}

ConstTensorView File::view(const std::string &name) const {
    const TensorInfo &t = tensor(name);
    const auto dtype = dtype_from_tag(t.dtype);
    if (!dtype) {
        fail(ErrorCode::dtype, impl_->path, "tensor '" + name + "' has dtype " + t.dtype + "; a view needs F32, BF16 or F16");
    }
    return ConstTensorView(t.data, *dtype, t.shape);
}

namespace {

// Writes all of `size` bytes, retrying short writes and interruptions.
bool write_all(int fd, const void *data, std::size_t size) {
    const char *p = static_cast<const char *>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

// The padded header and the byte size of each tensor, validating what the caller passed.
std::string build_header(const std::string &path, const std::vector<OutputTensor> &tensors,
                         const std::map<std::string, std::string> &metadata, std::vector<std::size_t> &sizes) {
    Json header = Json::object();
    if (!metadata.empty()) {
        Json meta = Json::object();
        for (const auto &[key, value] : metadata) meta[key] = value;
        header["__metadata__"] = std::move(meta);
    }
    std::uint64_t offset = 0;
    for (const OutputTensor &t : tensors) {
        const std::string where = "tensor '" + t.name + "': ";
        if (t.name == "__metadata__" || header.contains(t.name)) fail(ErrorCode::format, path, where + "name used twice");
        const std::size_t element_size = tag_size(t.dtype);
        if (element_size == 0) fail(ErrorCode::dtype, path, where + "unknown dtype '" + t.dtype + "'");
        for (const std::int64_t extent : t.shape) {
            if (extent < 0) fail(ErrorCode::shape, path, where + "negative dimension " + std::to_string(extent));
        }
        std::uint64_t bytes = 0;
        if (__builtin_mul_overflow(static_cast<std::uint64_t>(element_count(t.shape)), element_size, &bytes) ||
            __builtin_add_overflow(offset, bytes, &bytes)) {
            fail(ErrorCode::overflow, path, where + "too large");
        }
        if (t.data == nullptr && bytes != offset) fail(ErrorCode::null_data, path, where + "null data");
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, bytes}}};
        sizes.push_back(static_cast<std::size_t>(bytes - offset));
        offset = bytes;
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const Json::exception &e) {  // names or metadata that are not valid UTF-8
        fail(ErrorCode::format, path, std::string("cannot encode the header: ") + e.what());
    }
    // Padding to a multiple of 8 keeps the data section 8-byte aligned in the file.
    text.append((8 - text.size() % 8) % 8, ' ');
    return text;
}

// Where the data of a write to `path` ends up: through symlinks to the file they name (as `cp`
// does), else `path` itself. A path that names a directory is refused.
std::string write_target(const std::string &path) {
    namespace fs = std::filesystem;
    if (path.empty()) fail(ErrorCode::io, path, "empty output path");
    fs::path target(path);
    std::error_code error;
    for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(target, error)); ++hops) {
        const fs::path link = fs::read_symlink(target, error);
        if (error) break;
        target = link.is_absolute() ? link : target.parent_path() / link;
    }
    if (!target.has_filename() || fs::is_directory(target, error)) fail(ErrorCode::io, path, "is a directory, not a file");
    return target.string();
}

}  // namespace

Encoded encode(const std::string &path, const std::vector<OutputTensor> &tensors,
               const std::map<std::string, std::string> &metadata) {
    std::vector<std::size_t> sizes;
    const std::string header = build_header(path, tensors, metadata, sizes);
    Encoded encoded;
    for (int i = 0; i < 8; ++i) encoded.head.push_back(static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * i)));
    encoded.head += header;
    for (std::size_t i = 0; i < tensors.size(); ++i) encoded.data.emplace_back(tensors[i].data, sizes[i]);
    return encoded;
}

void write(const std::string &path, const std::vector<OutputTensor> &tensors,
           const std::map<std::string, std::string> &metadata) {
    const Encoded encoded = encode(path, tensors, metadata);
    const std::string target = write_target(path);

    // Write beside the target and rename, so that readers never see a half-written file. The
    // name is unique per call, not only per process: two threads may write the same path. A file
    // that is replaced keeps its permissions.
    static std::atomic<std::uint64_t> writes{0};
    const std::string temp = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(writes.fetch_add(1));
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail(ErrorCode::io, path, "cannot create " + temp + ": " + system_error_text());
    struct stat existing {};
    bool ok = ::stat(target.c_str(), &existing) != 0 || ::fchmod(fd, existing.st_mode & 07777) == 0;
    ok = ok && write_all(fd, encoded.head.data(), encoded.head.size());
    for (std::size_t i = 0; ok && i < encoded.data.size(); ++i) ok = write_all(fd, encoded.data[i].first, encoded.data[i].second);
    // On disk before the rename, so that a crash cannot leave the new name on missing data.
    ok = ok && ::fsync(fd) == 0;
    std::string failure = ok ? std::string() : "cannot write " + temp + ": " + system_error_text();
    if (::close(fd) != 0 && failure.empty()) failure = "cannot write " + temp + ": " + system_error_text();
    if (failure.empty() && std::rename(temp.c_str(), target.c_str()) != 0) {
        failure = "cannot rename " + temp + ": " + system_error_text();
    }
    if (!failure.empty()) {
        ::unlink(temp.c_str());
        fail(ErrorCode::io, path, failure);
    }
}

const char *dtype_tag(DType dtype) {
    switch (dtype) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    }
    return "F32";
}

std::optional<DType> dtype_from_tag(const std::string &tag) {
    if (tag == "F32") return DType::f32;
    if (tag == "BF16") return DType::bf16;
    if (tag == "F16") return DType::f16;
    return std::nullopt;
}

std::size_t tag_size(const std::string &tag) {
    const auto it = tag_sizes().find(tag);
    return it == tag_sizes().end() ? 0 : it->second;
}

}  // namespace magi2norm::safetensors
