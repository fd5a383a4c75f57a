// The safetensors reader and the checkpoint loader on any bytes as a file: header length, JSON,
// offsets, dtypes, sizes, truncation, huge or negative numbers, duplicate keys, overlapping
// data. Opening either succeeds, and then every tensor's bytes lie in the file (read in full
// here, so that ASan sees any that do not) and write back to the same tensors, or it is refused
// with a magi2norm::Error; any other outcome is a crash.
#include <cstring>
#include <string>

#include "fuzz_input.hpp"
#include "magi2norm/checkpoint.hpp"
#include "magi2norm/safetensors.hpp"

namespace {

namespace st = magi2norm::safetensors;

std::string scratch(const char *name) { return (fuzz::scratch_dir() / name).string(); }

void write_bytes(const std::string &path, const std::uint8_t *data, std::size_t size) {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) fuzz::finding("cannot write " + path);
}

// The sum of every byte of every tensor: reads them all.
unsigned checksum(const st::File &file) {
    unsigned sum = 0;
    for (const std::string &name : file.names()) {
        const st::TensorInfo &t = file.tensor(name);
        for (std::size_t i = 0; i < t.nbytes; ++i) sum += static_cast<const unsigned char *>(t.data)[i];
    }
    return sum;
}

void round_trip(const st::File &file) {
    std::vector<st::OutputTensor> tensors;
    for (const std::string &name : file.names()) {
        const st::TensorInfo &t = file.tensor(name);
        tensors.push_back({t.name, t.dtype, t.shape, t.data});
    }
    const std::string copy = scratch("copy.safetensors");
    try {
        st::write(copy, tensors, file.metadata());
    } catch (const magi2norm::Error &) {
        return;  // names or metadata that JSON cannot encode (not UTF-8)
    }
    const st::File again = st::File::open(copy);
    if (again.names() != file.names() || again.metadata() != file.metadata()) fuzz::finding("names or metadata changed in a round trip");
    for (const std::string &name : file.names()) {
        const st::TensorInfo &a = file.tensor(name), &b = again.tensor(name);
        if (a.dtype != b.dtype || a.shape != b.shape || a.nbytes != b.nbytes || std::memcmp(a.data, b.data, a.nbytes) != 0) {
            fuzz::finding("tensor '" + name + "' changed in a round trip");
        }
    }
}

void load_norms(const magi2norm::Checkpoint &checkpoint) {
    for (const std::string &key : checkpoint.file().names()) {
        const st::TensorInfo &t = checkpoint.file().tensor(key);
        const std::string suffix = ".weight";
        if (key.size() < suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
        const std::string module = key.substr(0, key.size() - suffix.size());
        const std::int64_t count = static_cast<std::int64_t>(t.nbytes / std::max<std::size_t>(1, st::tag_size(t.dtype)));
        for (const std::int64_t dim : {count, count / 2, std::int64_t{1} << 40}) {
            try {
                checkpoint.load(module, {dim, 1e-6f, 2, 1});
                checkpoint.load(module, {dim, 1e-6f});
            } catch (const magi2norm::Error &) {
            }
        }
    }
    try {
        checkpoint.load_all("", [](const std::string &) { return std::optional<magi2norm::NormConfig>(magi2norm::NormConfig{4}); });
    } catch (const magi2norm::Error &) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    const std::string path = scratch("in.safetensors");
    write_bytes(path, data, size);
    try {
        const magi2norm::Checkpoint checkpoint = magi2norm::Checkpoint::open(path);
        static volatile unsigned sink;
        sink = checksum(checkpoint.file());
        for (const std::string &name : checkpoint.file().names()) {
            try {
                checkpoint.file().view(name);
            } catch (const magi2norm::Error &) {
            }
        }
        round_trip(checkpoint.file());
        load_norms(checkpoint);
    } catch (const magi2norm::Error &) {
    }
    return 0;
}
