// Reading and writing safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then the raw data.
// Files are memory-mapped for reading; every malformation (truncation, bad JSON, offsets out of
// range or overlapping, a shape that does not match the byte count) throws
// magi2norm::Error(ErrorCode::format) naming the file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::safetensors {

struct TensorInfo {
    std::string name;
    std::string dtype;                // as in the file: "F32", "BF16", "F16", "I32", "I64", ...
    std::vector<std::int64_t> shape;
    const void *data = nullptr;       // into the mapping; valid while the File lives
    std::size_t nbytes = 0;
};

class File {
public:
    // Maps and validates `path`. Throws Error(io) when it cannot be opened, Error(format) when
    // it is malformed.
    static File open(const std::string &path);

    const std::string &path() const;
    const std::map<std::string, std::string> &metadata() const;
    std::vector<std::string> names() const;  // in file order
    bool contains(const std::string &name) const;
    // Throws Error(format) naming the missing tensor.
    const TensorInfo &tensor(const std::string &name) const;
    // A contiguous view of an F32/BF16/F16 tensor; Error(dtype) for any other dtype.
    ConstTensorView view(const std::string &name) const;

    File(File &&) noexcept;
    File &operator=(File &&) noexcept;
    ~File();

private:
    struct Impl;
    explicit File(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

struct OutputTensor {
    std::string name;
    std::string dtype;                // "F32", "BF16", "F16", "I32", "I64"
    std::vector<std::int64_t> shape;
    const void *data = nullptr;       // contiguous, element_count(shape) * size of dtype bytes
};

// Writes a safetensors file (tensors in the given order), flushed to disk before it replaces
// `path`. Throws Error(io) on failure.
void write(const std::string &path, const std::vector<OutputTensor> &tensors,
           const std::map<std::string, std::string> &metadata = {});

// The bytes `write` puts in a file, for a host that writes the file itself: `head` (the 8-byte
// header length and the padded header), then each piece of `data` in order (pointing into the
// tensors' data). Throws as write does for tensors that would make a malformed file; `path`
// names the file in those errors.
struct Encoded {
    std::string head;
    std::vector<std::pair<const void *, std::size_t>> data;
};
Encoded encode(const std::string &path, const std::vector<OutputTensor> &tensors,
               const std::map<std::string, std::string> &metadata = {});

// The safetensors dtype name of a DType ("F32", "BF16", "F16") and back (nullopt if not one).
const char *dtype_tag(DType dtype);
std::optional<DType> dtype_from_tag(const std::string &tag);
// Bytes per element of a safetensors dtype tag; 0 for an unknown tag.
std::size_t tag_size(const std::string &tag);

}  // namespace magi2norm::safetensors
