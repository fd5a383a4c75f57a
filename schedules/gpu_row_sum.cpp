#include "gpu_row_sum.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_gpu_row_sum(Func sum, const RDom &blocks, const Expr &row_threads, int vec, int unroll, const LoopLevel &at,
                          const Var &rows) {
    // A serial chain of threads / kGroup + kGroup adds after the threads' own shares.
    constexpr int kGroup = 16;
    RVar ro("ro"), ri("ri"), r_thread("r_thread"), r_vec("r_vec"), r_group("r_group"), r_member("r_member");
    RVar r_step("r_step"), r_unrolled("r_unrolled"), r_d("r_d");
    Var lane("lane"), group("group");
    // With one term per partial, lane l of block b is element 16 b + l: fused, the two are the
    // normalized axis (rounded up to 16; the padding adds zeros).
    sum.update(0)
        .fuse(blocks.x, blocks.y, r_d)
        .split(r_d, ro, ri, row_threads * vec, TailStrategy::GuardWithIf)
        .split(ri, r_thread, r_vec, vec);
    Func lanes = sum.update(0).rfactor(r_thread, lane);
    lanes.compute_at(at).reorder(lane, rows).gpu_threads(lane, rows);
    // Unrolled steps keep their order (ro ascending), so the sums do not change.
    lanes.update()
        .reorder(r_vec, ro, lane, rows)
        .gpu_threads(lane, rows)
        .split(ro, r_step, r_unrolled, unroll, TailStrategy::GuardWithIf)
        .unroll(r_unrolled);
    sum.update(0).split(r_thread, r_group, r_member, kGroup, TailStrategy::GuardWithIf);
    Func groups = sum.update(0).rfactor(r_group, group);
    groups.compute_at(at).reorder(group, rows).gpu_threads(group, rows);
    groups.update().reorder(r_member, group, rows).gpu_threads(group, rows);
}

}  // namespace magi2norm::schedules
