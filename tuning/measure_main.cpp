// magi2-tune-measure: times the pending schedules of a GPU tuning record on this machine's GPU,
// from the variants magi2-tune made elsewhere (the machine with the GPU needs no Halide); and,
// with --confirm, each class's pick of a CPU record against the default (confirm.hpp), in a
// process of its own, which magi2-tune runs when its search ends. kHelp lists the flags.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "batch.hpp"
#include "confirm.hpp"
#include "record.hpp"

namespace {

using namespace magi2norm::tuning;

constexpr const char *kHelp = R"(magi2-tune-measure: the measuring half of magi2-tune (docs/tuning.md).

  magi2-tune-measure --record FILE --cache DIR --backend cuda|opencl [--rounds N]
      times the pending schedules of a GPU record on this machine's GPU (then, where the
      candidates were made: magi2-tune --select --record FILE)
  magi2-tune-measure --confirm --record FILE --cache DIR [--seconds S]
      times each class's pick of a CPU record against the default in fresh interleaved rounds
      (10 to 400 a class, as S allows; default 60) and ships the pick only where the 95% interval
      of its speedup lies above 1; writes the verdicts into FILE
  --help  this text
)";

[[noreturn]] void usage(const std::string &why) {
    std::fprintf(stderr, "magi2-tune-measure: %s\n(magi2-tune-measure --help lists the flags)\n", why.c_str());
    std::exit(2);
}

// The name and compute capability of CUDA device 0, asked of the driver; empty when none answers.
std::string cuda_device(int &capability) {
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!driver) return "";
    using Init = int (*)(unsigned);
    using Get = int (*)(int *, int);
    using Name = int (*)(char *, int, int);
    using Attribute = int (*)(int *, int, int);
    const auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
    const auto get = reinterpret_cast<Get>(dlsym(driver, "cuDeviceGet"));
    const auto name = reinterpret_cast<Name>(dlsym(driver, "cuDeviceGetName"));
    const auto attribute = reinterpret_cast<Attribute>(dlsym(driver, "cuDeviceGetAttribute"));
    int device = 0, major = 0, minor = 0;
    char text[256] = {};
    if (!init || !get || !name || !attribute || init(0) != 0 || get(&device, 0) != 0 || name(text, sizeof text, device) != 0) {
        return "";
    }
    attribute(&major, 75, device);  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    attribute(&minor, 76, device);
    capability = major * 10 + minor;
    return text;
}

}  // namespace

int main(int argc, char **argv) {
    std::string record_path, cache, backend_name;
    int rounds = 7;
    bool confirm = false;
    ConfirmOptions confirm_options;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kHelp, stdout);
            return 0;
        }
        if (a == "--confirm") {
            confirm = true;
            continue;
        }
        if (i + 1 >= argc) usage(a + " needs a value");
        if (a == "--record") record_path = argv[++i];
        else if (a == "--cache") cache = argv[++i];
        else if (a == "--backend") backend_name = argv[++i];
        else if (a == "--rounds") rounds = std::atoi(argv[++i]);
        else if (a == "--seconds") confirm_options.seconds = std::atof(argv[++i]);
        else usage("unknown argument " + a);
    }
    if (record_path.empty() || cache.empty()) usage("--record and --cache are required");
    if (confirm) {
        auto record = load(record_path);
        if (!record) usage("no record at " + record_path);
        if (record->backend != "cpu") usage("--confirm takes a CPU record");
        std::printf("magi2-tune-measure: confirming %zu classes' picks (%.0f s)\n", record->classes.size(), confirm_options.seconds);
        Compiler compiler(cache, 1);
        confirm_picks(*record, compiler, confirm_options);
        save(*record, record_path);
        std::printf("record: %s\n", record_path.c_str());
        return 0;
    }
    magi2norm::Backend backend = magi2norm::Backend::cuda;
    if (backend_name == "opencl") backend = magi2norm::Backend::opencl;
    else if (backend_name != "cuda") usage("--backend is cuda or opencl");
    auto record = load(record_path);
    if (!record) usage("no record at " + record_path);
    if (backend == magi2norm::Backend::cuda) {
        int capability = 0;
        record->machine.gpu = cuda_device(capability);
        if (record->machine.gpu.empty()) {
            std::fprintf(stderr, "magi2-tune-measure: no CUDA device answers\n");
            return 1;
        }
        record->machine.compute_capability = capability;
    } else {
        record->machine.gpu = "opencl";
    }
    std::printf("magi2-tune-measure: %s, %zu schedules\n", record->machine.gpu.c_str(), record->measured.size());
    const Compiler compiler(cache, 1);
    measure_pending(*record, compiler, backend, rounds);
    save(*record, record_path);
    std::printf("record: %s\n", record_path.c_str());
    return 0;
}
