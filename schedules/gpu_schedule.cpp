#include "gpu_schedule.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_gpu(NormStages &s, const GpuScheduleParams &params, const Target &) {
    const int threads = params.threads > 0 ? params.threads : 256;
    // Halide emits PTX vector loads only where it can prove 16-byte alignment, which arbitrary
    // strides do not give; scalar loads with consecutive threads on consecutive elements
    // (vec = 1) coalesce fully, so that is the default until aligned fast paths exist.
    const int vec = params.vector_width > 0 ? params.vector_width : 1;

    // One block per row (h, a, t as the grid), threads across the row. On the fast path
    // (unit strides, D a multiple of vec) each thread touches `vec` consecutive elements per
    // step, so loads and stores are wide and a warp reads contiguous memory; the guard for the
    // row's end is per vector, so no lane-wise predication is needed (OpenCL C has none).
    Var d_out("d_out"), d_chunk("d_chunk"), d_thread("d_thread"), d_vec("d_vec");
    s.output.reorder(s.d, s.h, s.a, s.t).gpu_blocks(s.h, s.a, s.t);
    Expr wide = s.dim % vec == 0 && s.x_inner_stride == 1 && s.out_inner_stride == 1;
    s.output.specialize(wide)
        .split(s.d, d_chunk, d_vec, vec, TailStrategy::RoundUp)
        .split(d_chunk, d_out, d_thread, threads, TailStrategy::GuardWithIf)
        .reorder(d_vec, d_thread, d_out)
        .gpu_threads(d_thread)
        .vectorize(d_vec);
    s.output.split(s.d, d_out, d_thread, threads, TailStrategy::GuardWithIf)
        .reorder(d_thread, d_out)
        .gpu_threads(d_thread);

    s.modality.compute_at(s.output, s.h);
    s.inv_rms.compute_at(s.output, s.h);
    s.sum_squares.compute_at(s.output, s.h);

    // Each thread accumulates its share of the row (on the fast path the same elements it later
    // writes, so the second read hits L1) in one register; the block's partial sums then meet in
    // shared memory and are added in thread order by one thread.
    RVar ro("ro"), ri("ri"), r_thread("r_thread"), r_vec("r_vec");
    Var lane("lane");
    s.sum_squares.update()
        .split(s.r.x, ro, ri, threads * vec, TailStrategy::GuardWithIf)
        .split(ri, r_thread, r_vec, vec);
    Func lanes = s.sum_squares.update().rfactor(r_thread, lane);
    lanes.compute_at(s.output, s.h).gpu_threads(lane);
    lanes.update().reorder(r_vec, ro, lane).gpu_threads(lane);
}

}  // namespace magi2norm::schedules
