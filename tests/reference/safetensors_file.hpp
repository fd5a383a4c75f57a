// A safetensors file read without the library (format: an 8-byte little-endian header length,
// a JSON header of {name: {dtype, shape, data_offsets}} and `__metadata__`, then the data), so
// that the golden files and the tool's outputs reach the tests through code the library does not
// share: a bug in magi2norm's own reader or writer cannot hide behind itself.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reference/host_tensor.hpp"

namespace ref {

class SafetensorsFile {
public:
    // Reads and checks the whole file; throws std::runtime_error naming the file and the problem.
    static SafetensorsFile read(const std::string &path);

    const std::map<std::string, std::string> &metadata() const { return metadata_; }
    // Tensor names, sorted.
    std::vector<std::string> names() const;
    // An F32, BF16 or F16 tensor, copied.
    HostTensor tensor(const std::string &name) const;
    // An I32 tensor's values.
    std::vector<std::int32_t> int32s(const std::string &name) const;

private:
    struct Entry {
        std::string dtype;  // as the file spells it: "F32", "BF16", "F16", "I32", ...
        Shape shape;
        std::size_t begin = 0, end = 0;  // byte offsets into data_
    };
    const Entry &entry(const std::string &name) const;

    std::string path_;
    std::map<std::string, std::string> metadata_;
    std::map<std::string, Entry> entries_;
    std::vector<unsigned char> data_;
};

}  // namespace ref
