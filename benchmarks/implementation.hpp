// An implementation of the norm the suite measures: ours, or a peer. Each is prepared once per
// benchmark run for a case's workspace, then called once per iteration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cases.hpp"
#include "workspace.hpp"

namespace magi2norm::bench {

class Runner {
public:
    virtual ~Runner() = default;
    // Normalizes the input of buffer pair `pair`; returns where the output is (the pair's output
    // buffer, or memory the implementation allocated itself), valid until the next call.
    virtual const void *run(std::size_t pair) = 0;
};

struct Implementation {
    std::string name;  // the last component of the benchmark name; the report keys on it
    int threads = 1;   // threads it computes with (a counter, next to the ceilings' threads)
    std::function<bool(const Case &)> supports;
    std::function<std::unique_ptr<Runner>(Workspace &)> prepare;
    bool computes_norm = true;     // false for a yardstick (memcpy): its output is not checked
    bool nearby_ceilings = false;  // its memory-bound cases get ceilings measured around them
};

// Token counts up to which a call counts as tiny (the tiny-call target's T = 1 and T = 16), and
// from which the bandwidth targets apply.
constexpr std::int64_t kTinyTokens = 16;
constexpr std::int64_t kLargeTokens = 4096;

// magi2norm::RMSNorm::forward, the library as a host calls it.
Implementation ours();
// A magi2norm::Plan made once per case and run per call ("ours_planned").
Implementation ours_planned();
// On a CPU with AVX-512 BF16, the cases with BF16 outputs through the variant the library would
// run without that ISA's family: its previous integer BF16 encoder ("ours_integer_bf16").
Implementation ours_integer_bf16();
// In a build from a tuning record, the cases a class of it holds, planned as a build without
// the record runs them ("ours_untuned"): beside "ours", the record's gain in one process.
Implementation ours_untuned();
// Ours on the same memory through other views ("ours_one_sequence": [1, T, ...];
// "ours_heads_major": [rows, T, D] of the multi-row cases), and with the output at an address of
// exactly 64, 32, 16, 4 or 2 bytes' alignment ("ours_out_at_<bytes>", the dtype permitting), for
// the cases with one modality and T >= kLargeTokens: each should run at the plain view's speed;
// and the plain view with ordinary stores forced ("ours_ordinary_stores": against the copy).
std::vector<Implementation> ours_view_forms();
// A memcpy moving as many bytes as the norm, for tiny cases only: the tiny-call yardstick.
Implementation memcpy_reference();
// Runs job(context, part), which returns 0, for every part in [0, parts) on `threads` threads of
// the library's own pool, as the library runs its loops: the hand kernels share it, so that they
// and ours differ in their kernels, not in their threads.
void run_on_library_pool(int threads, int parts, int (*job)(void *context, int part), void *context);
// The formula as a hand-written scalar loop.
Implementation scalar_peer();
// The library's own arithmetic written by hand in AVX2 intrinsics, two threads ("hand_avx2"): the
// bar a tuned build is held to. Checks in its prepare that it gives the library's bits.
Implementation hand_avx2_peer();
// The same arithmetic in AVX-512 intrinsics with AVX512_BF16 (vcvtneps2bf16, with the lanes it
// rounds otherwise than the library, FP32 subnormals and NaNs, redone), two threads
// ("hand_avx512"). Checks in its prepare that it gives the library's bits, on the case's data and
// on rows of special values. Its file is built for AVX-512 throughout: call it only where
// hand_avx512_runs_here().
Implementation hand_avx512_peer();
// A candidate arithmetic for the row sums in the same AVX-512 kernel: FP32 throughout, the blocks
// added as a fixed tree ("hand_avx512_fp32_tree"; its prepare checks the contract against
// float64, not the library's bits). Call it only where hand_avx512_runs_here().
Implementation hand_avx512_fp32_tree_candidate();
// Whether this CPU (and its OS) runs AVX-512 F, BW, VL, DQ and BF16 code.
inline bool hand_avx512_runs_here() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16");
}
// The project's Halide algorithm with each of Halide's autoschedulers instead of its schedule.
std::vector<Implementation> halide_autoscheduler_peers();
// PyTorch (libtorch) on the CPU: the model's formula, and torch::rms_norm. Empty, with `why`
// saying so, when the suite was built without libtorch.
std::vector<Implementation> torch_peers(std::string &why);

}  // namespace magi2norm::bench
