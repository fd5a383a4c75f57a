#include "cpu_backward_schedule.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_cpu_backward(BackwardStages &s, const Target &target) {
    const int vec = target.natural_vector_size(Float(32));
    RVar tile = s.partial_terms.w;

    // A task is whole blocks of tokens (the runtime's, a fixed count, never the thread count's),
    // its tiles one after another, each in two passes over the tile's rows, the tile still in
    // L2: both row sums, then the partials and dx in one loop, vector by vector (the partials'
    // vector first: an in-place dx overwrites dy after they have read it). Tasks write disjoint
    // partials and dx rows, which Halide cannot prove through the clamps that keep the tiles
    // inside their task.
    // Rows of whole vectors (the streaming-store variants) need no tail: a guarded one leaves
    // masked stores, which cannot be streaming stores, where Halide cannot prove it never runs.
    const TailStrategy tail = s.whole_vectors ? TailStrategy::RoundUp : TailStrategy::GuardWithIf;
    Var dv("dv");
    const auto over_tasks = [&](Stage stage, const RDom &r) {
        stage.split(s.d, s.d, dv, vec, tail).vectorize(dv).reorder(dv, s.d, r.x, r.y, r.z, r.w, r[4]).allow_race_conditions().parallel(r[4]);
    };
    over_tasks(s.partials.update(), s.partial_terms);
    over_tasks(s.dx.update(), s.dx_terms);
    s.dx.update().compute_with(s.partials.update(), s.d);
    // The partials start at zero, a task's blocks each.
    s.partials.vectorize(s.d, vec, tail);

    // The tile's row sums in one pass over its rows (both sums of a row at once), then its
    // inverse RMS and mean of g * n, a float each a row, for the partials and dx. The row sums
    // keep the forward's lanes.
    s.sum_squares.compute_at(s.partials, tile);
    s.inv_rms.compute_at(s.partials, tile);
    s.mean_gn.compute_at(s.partials, tile);
    // Rows of inv = 0 only (the algorithm's select skips the others): a row at a time.
    s.nonfinite_terms.compute_at(s.mean_gn, s.h);
    s.sum_squares_lanes.compute_at(s.sum_squares, s.h).vectorize(s.lane);
    s.sum_squares_lanes.update().vectorize(s.lane);
    // With the forward's inverse RMS given, the pass over the tile sums g * x alone.
    s.sum_gx.compute_at(s.partials, tile);
    s.sum_gx_lanes.compute_at(s.sum_gx, s.h).vectorize(s.lane);
    s.sum_gx_lanes.update().vectorize(s.lane);

    // The K rows' sum of a vector (singleton-head broadcasting) stays in a register beside its dx
    // vector; variants of one row (K = 1) have no sum, whose loop spilled dx's pointers.
    if (s.dx_summed.has_update_definition()) {
        s.dx_summed.compute_at(s.dx, s.d);
        s.dx_summed.vectorize(s.d, vec, TailStrategy::GuardWithIf);
        s.dx_summed.update().vectorize(s.d, vec, TailStrategy::GuardWithIf);
    }
}

}  // namespace magi2norm::schedules
