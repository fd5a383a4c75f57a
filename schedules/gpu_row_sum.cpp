#include "gpu_row_sum.h"

namespace magi2norm::schedules {

using namespace Halide;

namespace {

void threads(Stage stage, const std::vector<VarOrRVar> &vars) {
    if (vars.size() == 1) stage.gpu_threads(vars[0]);
    if (vars.size() == 2) stage.gpu_threads(vars[0], vars[1]);
    if (vars.size() == 3) stage.gpu_threads(vars[0], vars[1], vars[2]);
}

}  // namespace

void schedule_gpu_row_sum(Func sum, Func lane_sums, const RDom &blocks, int unroll, const LoopLevel &at,
                          const std::vector<VarOrRVar> &lane_threads, const std::vector<VarOrRVar> &sum_threads) {
    // The 16 lanes of a row are 16 neighbouring threads, and lane l reads the elements l, l + 16,
    // ... of each block: a half-warp reads 16 consecutive elements a step.
    lane_sums.compute_at(at);
    threads(lane_sums, lane_threads);
    RVar r_step("r_step"), r_unrolled("r_unrolled");
    Stage update = lane_sums.update();
    std::vector<VarOrRVar> order{blocks.x};
    order.insert(order.end(), lane_threads.begin(), lane_threads.end());
    update.reorder(order);
    threads(update, lane_threads);
    // Unrolled blocks keep their order, so the sums do not change.
    update.split(blocks.x, r_step, r_unrolled, unroll, TailStrategy::GuardWithIf).unroll(r_unrolled);
    sum.compute_at(at);
    threads(sum, sum_threads);
}

}  // namespace magi2norm::schedules
