// The library's parallel loop (runtime/src/devices/threads.cpp) must be in place before the first kernel
// runs, in any host. This program uses nothing but RMSNorm::forward: a static-library link then
// pulls in only the objects forward needs, which is how a static initialiser that installed the
// loop was once dropped, leaving hosts on Halide's own pool (a lock and a wake-up per call, even
// for one task). Its own executable, so that no other test's use of the threads API links the
// loop in for it.
#include <gtest/gtest.h>

#include <vector>

#include "HalideRuntime.h"
#include "magi2norm/magi2norm.hpp"

namespace {

// The loop Halide calls now, read by swapping it out and back (this test runs no norm meanwhile).
halide_do_par_for_t current_par_for() {
    const halide_do_par_for_t current = halide_set_custom_do_par_for(halide_default_do_par_for);
    halide_set_custom_do_par_for(current);
    return current;
}

TEST(ParallelLoop, InstalledByTheFirstForwardOfAHostThatNeverTouchesThreads) {
    magi2norm::NormConfig config;
    config.dim = 128;
    const magi2norm::RMSNorm norm(config);
    std::vector<float> x(2 * 128, 0.5f), out(2 * 128, 0.0f);
    norm.forward(magi2norm::ConstTensorView(x.data(), magi2norm::DType::f32, {2, 128}), magi2norm::Grouping::none(),
                 magi2norm::TensorView(out.data(), magi2norm::DType::f32, {2, 128}));
    // Every element of a row of equal values normalizes to 1 (scale 1, eps 1e-6 against 0.25).
    EXPECT_NEAR(out[0], 1.0f, 1e-5f);
    EXPECT_NEAR(out.back(), 1.0f, 1e-5f);
    EXPECT_NE(current_par_for(), halide_default_do_par_for)
        << "forward ran its kernel on Halide's own parallel loop, not the library's";
}

}  // namespace
