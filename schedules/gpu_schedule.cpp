#include "gpu_schedule.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_gpu(NormStages &s, const GpuScheduleParams &params, const Target &) {
    const int threads = params.threads > 0 ? params.threads : 256;

    // One block per row.
    Var ha("ha"), row("row"), d_out("d_out"), d_thread("d_thread");
    s.output.fuse(s.h, s.a, ha).fuse(ha, s.t, row).gpu_blocks(row);
    s.output.split(s.d, d_out, d_thread, threads, TailStrategy::GuardWithIf)
        .reorder(d_thread, d_out, row)
        .gpu_threads(d_thread);

    s.modality.compute_at(s.output, row);
    s.inv_rms.compute_at(s.output, row);
    s.sum_squares.compute_at(s.output, row);

    // Each thread accumulates a strided share of the row in a register; the partial sums meet
    // in shared memory and are added in thread order.
    RVar ro("ro"), ri("ri");
    Var lane("lane");
    s.sum_squares.update().split(s.r.x, ro, ri, threads, TailStrategy::Predicate);
    Func lanes = s.sum_squares.update().rfactor(ri, lane);
    lanes.compute_at(s.output, row).gpu_threads(lane);
    lanes.update().gpu_threads(lane);
}

}  // namespace magi2norm::schedules
