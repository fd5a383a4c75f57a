#include "cpu_backward_schedule.h"

namespace magi2norm::schedules {

using namespace Halide;

void schedule_cpu_backward(BackwardStages &s, const Target &target) {
    const int vec = target.natural_vector_size(s.dx_bytes == 2 ? UInt(16) : Float(32));
    const int vec64 = target.natural_vector_size(Float(64));
    RVar head = s.partial_terms.x, middle = s.partial_terms.y, token = s.partial_terms.z;
    RVar group = s.partial_groups.x, tile = s.partial_groups.y, block = s.partial_groups.z;
    RVar dx_token = s.dx_tokens.x;

    // A task is one block of tokens (the runtime's, a fixed count, never the thread count's),
    // its tiles one after another, each in three passes over the tile's rows, the tile still
    // in L2: both row sums, the partial sums (an in-place dx overwrites dy after them), then its
    // dx rows (`backward/mhc_norm/bf16_f32_bf16/M1/T4096`: three passes a block took 1.1x the time).
    // Blocks write disjoint partials and dx rows, which Halide cannot prove through the clamps
    // that keep the tiles inside their block.
    s.partials.update().reorder(s.d, s.h, group, tile, block).allow_race_conditions().parallel(block);
    s.dx.update().reorder(s.d, s.h, s.a, dx_token, s.dx_tokens.y, s.dx_tokens.z).allow_race_conditions().parallel(s.dx_tokens.z);
    s.dx.update().compute_with(s.partials.update(), tile);

    // The tile's row sums in one pass over its rows (both sums of a row at once), then its
    // inverse RMS and mean of g * n, a float each a row, for the partials and dx. The row sums
    // keep the forward's lanes.
    s.sum_squares.compute_at(s.partials, tile);
    s.inv_rms.compute_at(s.partials, tile);
    s.mean_gn.compute_at(s.partials, tile);
    s.sum_squares_lanes.compute_at(s.sum_squares, s.h).vectorize(s.lane);
    s.sum_squares_lanes.update().vectorize(s.lane);

    // Vectors over dense rows (the runtime sends only those). GuardWithIf, not ShiftInwards: an
    // in-place dx would recompute the shifted elements from dy it has already overwritten. The K
    // rows' sum of a vector (singleton-head broadcasting) stays in a register beside its dx
    // vector (`backward/mhc_norm/bf16_f32_bf16/M1/T4096`: 1.2x a row staged); variants of one
    // row (K = 1) have no sum, whose loop spilled dx's pointers (pre-norm 1.13x the time).
    Var dv("dv");
    s.dx.update().split(s.d, s.d, dv, vec, TailStrategy::GuardWithIf).vectorize(dv);
    if (s.dx_summed.has_update_definition()) {
        s.dx_summed.compute_at(s.dx, s.d);
        s.dx_summed.vectorize(s.d, vec, TailStrategy::GuardWithIf);
        s.dx_summed.update().vectorize(s.d, vec, TailStrategy::GuardWithIf);
    }
    // The tile's groups' FP32 rows, P * D floats each, then each added once into the block's
    // FP64 row (FP64 terms added a product each: `backward/mhc_norm/bf16_f32_bf16/M1/T4096`
    // 1.16x the time).
    s.group_sum.compute_at(s.partials, tile).vectorize(s.d, vec, TailStrategy::GuardWithIf);
    s.group_sum.update().reorder(s.d, head, s.h, middle, token, s.grp).vectorize(s.d, vec, TailStrategy::GuardWithIf);
    s.partials.update().vectorize(s.d, vec64, TailStrategy::GuardWithIf);
}

}  // namespace magi2norm::schedules
