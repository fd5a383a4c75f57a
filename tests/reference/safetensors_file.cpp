#include "reference/safetensors_file.hpp"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ref {

namespace {

std::size_t dtype_bytes(const std::string &dtype) {
    if (dtype == "F32" || dtype == "I32") return 4;
    if (dtype == "BF16" || dtype == "F16") return 2;
    throw std::runtime_error("unsupported dtype " + dtype);
}

}  // namespace

SafetensorsFile SafetensorsFile::read(const std::string &path) {
    SafetensorsFile file;
    file.path_ = path;
    const auto fail = [&](const std::string &what) { throw std::runtime_error(path + ": " + what); };
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open");
    const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() < 8) fail("shorter than its header length");
    std::uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | bytes[static_cast<std::size_t>(i)];
    if (header_bytes > bytes.size() - 8) fail("header runs past the end");
    const nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_bytes));
    file.data_.assign(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_bytes), bytes.end());
    for (const auto &[name, value] : header.items()) {
        if (name == "__metadata__") {
            for (const auto &[key, text] : value.items()) file.metadata_[key] = text.get<std::string>();
            continue;
        }
        Entry e;
        e.dtype = value.at("dtype").get<std::string>();
        e.shape = value.at("shape").get<Shape>();
        e.begin = value.at("data_offsets").at(0).get<std::size_t>();
        e.end = value.at("data_offsets").at(1).get<std::size_t>();
        if (e.begin > e.end || e.end > file.data_.size()) fail(name + "'s data_offsets leave the data");
        if (e.end - e.begin != static_cast<std::size_t>(num_elements(e.shape)) * dtype_bytes(e.dtype)) {
            fail(name + "'s bytes do not match its shape and dtype");
        }
        file.entries_[name] = e;
    }
    return file;
}

std::vector<std::string> SafetensorsFile::names() const {
    std::vector<std::string> names;
    for (const auto &[name, e] : entries_) names.push_back(name);
    return names;
}

const SafetensorsFile::Entry &SafetensorsFile::entry(const std::string &name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) throw std::runtime_error(path_ + ": no tensor " + name);
    return it->second;
}

HostTensor SafetensorsFile::tensor(const std::string &name) const {
    const Entry &e = entry(name);
    const std::map<std::string, DType> dtypes{{"F32", DType::f32}, {"BF16", DType::bf16}, {"F16", DType::f16}};
    const auto dtype = dtypes.find(e.dtype);
    if (dtype == dtypes.end()) throw std::runtime_error(path_ + ": " + name + " is " + e.dtype + ", not a float tensor");
    HostTensor t(dtype->second, e.shape);
    if (e.end > e.begin) std::memcpy(t.data(), data_.data() + e.begin, e.end - e.begin);
    return t;
}

std::vector<std::int32_t> SafetensorsFile::int32s(const std::string &name) const {
    const Entry &e = entry(name);
    if (e.dtype != "I32") throw std::runtime_error(path_ + ": " + name + " is " + e.dtype + ", not I32");
    std::vector<std::int32_t> values((e.end - e.begin) / sizeof(std::int32_t));
    if (!values.empty()) std::memcpy(values.data(), data_.data() + e.begin, e.end - e.begin);
    return values;
}

}  // namespace ref
