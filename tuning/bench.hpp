// Timing one tuning case: its norm planned once (a forward case; a backward case runs the whole
// backward call, its variant chosen as the library chooses it or given), its buffers (rotating
// past the last-level cache for the from-memory classes, one warm set for the in-cache ones),
// and kernels timed in interleaved rounds with the copy of the same bytes, so that a shared
// machine's changing load moves every side of a ratio alike.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "aligned_buffer.hpp"
#include "cases.hpp"
#include "copy_ceilings.hpp"
#include "magi2norm/internal.hpp"
#include "machine.hpp"
#include "magi2norm/magi2norm.hpp"
#include "record.hpp"

namespace magi2norm::tuning {

class CaseBench {
public:
    CaseBench(const TuneCase &tune_case, const ShapeClass &klass, const Machine &machine, Backend backend);
    CaseBench(const CaseBench &) = delete;
    CaseBench &operator=(const CaseBench &) = delete;

    // The variant the library runs for this call (its form and store kind are a candidate's too).
    const detail::KernelEntry &library_kernel() const { return *library_; }

    struct Times {
        std::vector<std::vector<double>> kernels;  // seconds per call, one entry a round, per kernel
        std::vector<double> copy;                  // copy GB/s, one a round (empty without the copy)
    };
    // `rounds` rounds after one untimed; each round times every kernel once, in an order that
    // turns from round to round, and then, with `with_copy`, an ordinary-store copy of as many
    // bytes as the call moves. A null kernel is the library's own. With `cut_hopeless`, the
    // rounds end early once kernels[2] is plainly slower than kernels[0] and [1] (hopeless()).
    Times measure(const std::vector<const detail::KernelEntry *> &kernels, int rounds, bool with_copy,
                  bool cut_hopeless = false);

    // Whether each timed call is followed by a read of its output (the streaming-store threshold
    // is a trade between the norm's writes and its consumer's reads).
    void read_output_after_calls(bool on) { read_output_ = on; }

    // The plan's variant of the form the library picks here, with ordinary (0) or streaming (1)
    // stores; null where the call cannot take it (and for a backward case).
    const detail::KernelEntry *library_kernel(int stores) const;

    // The output of one call of `kernel` on the first buffers, for comparing bits (a backward
    // case's: dx, then the weight gradient).
    std::vector<unsigned char> output(const detail::KernelEntry *kernel);

    std::int64_t bytes() const { return bytes_; }

private:
    void run(const detail::KernelEntry *kernel, std::size_t pair);
    double copy_gbps();
    double sample(const detail::KernelEntry *kernel);

    const TuneCase &case_;
    RMSNorm norm_;
    Grouping grouping_ = Grouping::none();  // by sizes where the case has modalities
    Plan plan_;  // a forward case's
    // A backward case's: dy beside each x (inputs_), dx in outputs_, and the weight gradient.
    std::vector<measure::AlignedBuffer> dys_;
    std::vector<float> dweight_;
    std::size_t dy_bytes_ = 0;
    // The backward call's views of set `pair`.
    struct BackwardViews {
        ConstTensorView x, dy;
        TensorView dx, dweight;
    };
    BackwardViews backward_views(std::size_t pair);
    const detail::KernelEntry *library_ = nullptr;
    std::int64_t bytes_ = 0;
    std::size_t in_bytes_ = 0, out_bytes_ = 0;
    std::vector<measure::AlignedBuffer> inputs_, outputs_;
    // CUDA: device copies of every pair, which the calls use in place (host views would time
    // the copies through the bus); empty elsewhere (OpenCL calls stage host views).
    struct DeviceBuffers;
    std::shared_ptr<DeviceBuffers> device_;
    const void *in_data(std::size_t pair) const;
    void *out_data(std::size_t pair) const;
    std::size_t next_pair_ = 0;
    int calls_per_sample_ = 1;
    measure::CopyMeter meter_;
    measure::CopyRun copy_;
    bool read_output_ = false;
    std::uint64_t sink_ = 0;
};

double median(std::vector<double> v);

// Whether the times so far show kernels[2] so much slower than kernels[0] and [1] that more
// rounds cannot make it a winner: its fastest sample over twice their slowest. An
// autoscheduler's schedule can run 37x the library's time on a GB call, where 7 more rounds
// would take minutes of a class's share.
bool hopeless(const CaseBench::Times &t);

// A schedule's times on a case from measure({nullptr, nullptr, schedule, ...}): the library's
// variant timed twice (the faster its time, their spread the noise), the schedule third; its
// rounds those measured (fewer than asked when cut).
CaseTimes case_times(const CaseBench::Times &t);

}  // namespace magi2norm::tuning
