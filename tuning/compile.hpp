// Candidates compiled in seconds: the project's generator, run as the build runs it but for one
// variant and one target, writes an object (through cmake/ir_steps.py for the
// streaming-store form), which is linked into a shared object and loaded into this process. The
// variants it makes use the Halide runtime inside the library this program links (exported to
// them), so they run exactly as the shipped ones do. A cache folder keeps every candidate made:
// a second request of the same one loads it again without compiling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magi2norm/internal.hpp"
#include "knob_space.hpp"

namespace magi2norm::tuning {

// Which schedule: the hand-written one with `config`, or one of Halide's autoschedulers at the
// given estimates (Adams2019 with `dropout_seed` > 0: one random-dropout sample, beam 1, as
// Halide's autotune loop draws them).
struct Schedule {
    std::string kind = "knobs";  // knobs | adams2019 | li2018 | mullapudi2016
    Config config;               // knobs
    std::int64_t estimate_tokens = 0, estimate_rows = 1, estimate_dim = 0;
    int dropout_seed = 0;

    bool autoscheduled() const { return kind != "knobs"; }
    std::string describe() const;
};

// One variant to make: a schedule for a dtype pair (the backward's forms: x, dy and dx), form
// and store kind, for a Halide target.
struct VariantRequest {
    Schedule schedule;
    DType in = DType::f32, out = DType::f32;
    DType dx = DType::f32;  // the backward's forms only
    detail::Form form = detail::Form::elements;
    int streaming_alignment = 0;  // > 0: streaming stores
    // The BF16 encode as the AVX-512 BF16 conversion (the build's native_bf16 family, through
    // cmake/ir_steps.py --native-bf16), for `target` MAGI2NORM_X86_BF16_TARGET.
    bool native_bf16 = false;
    std::string target;           // e.g. x86-64-linux-avx-avx2-f16c-fma-sse41; the build's features are added
    Backend backend = Backend::cpu;
    int compute_capability = 0;
};

// The request of `schedule` for a case whose library variant is `library`, for `target` (the
// backend's: this machine's ISA on CPUs): autoschedulers schedule the element form with ordinary stores;
// the knobs serve the form, store kind and BF16 encoder the library takes for the call (on an
// AVX-512 BF16 CPU, its native family: the target of that family alone), and the backward's dx
// dtype, x's. The search and the confirmation make the same candidates so.
VariantRequest request_for(const Schedule &schedule, const detail::KernelEntry &library, const std::string &target);

struct Variant {
    detail::KernelEntry entry{};  // fn null when it failed
    std::string name;             // its function name, the cache entry's
    std::string error;            // why it failed (the generator's or linker's last lines)
    double compile_seconds = 0;   // 0 when it came from the cache
};

class Compiler {
public:
    // `cache` is a folder (created); `jobs` compilations run at once.
    Compiler(std::string cache, int jobs);
    // Makes every request (from the cache where it can) and, with `load`, loads it; results in
    // request order. Without `load` (variants for another machine) only the names are filled in.
    std::vector<Variant> make(const std::vector<VariantRequest> &requests, bool load = true);
    // Loads a variant made earlier (by make, here or on another machine) by its name; `entry`
    // says what it is (its fn and name are filled in).
    Variant load(const std::string &name, const detail::KernelEntry &entry) const;

private:
    std::string cache_;
    int jobs_;
};

}  // namespace magi2norm::tuning
