// The first device-memory call of a process may reach the Halide runtime before any kernel has
// run (the scale upload): by then the library's hooks must be in place, or a failure goes to
// Halide's default error handler, which aborts the host. Here, with the CUDA backend compiled in
// and no CUDA driver, that first call must throw Error(device). Its own program, so that no
// earlier call in the process has installed the hooks already.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "magi2norm/magi2norm.hpp"

namespace {

using magi2norm::Backend;

TEST(FirstDeviceCall, WithoutADriverThrowsInsteadOfAborting) {
    const auto backends = magi2norm::compiled_backends();
    if (std::find(backends.begin(), backends.end(), Backend::cuda) == backends.end()) {
        GTEST_SKIP() << "built without the CUDA backend";
    }
    if (void *driver = dlopen("libcuda.so.1", RTLD_LAZY)) {
        dlclose(driver);
        GTEST_SKIP() << "a CUDA driver is present: this test needs a machine without one";
    }
    magi2norm::NormConfig config;
    config.dim = 64;
    const magi2norm::RMSNorm norm(config);
    // Never dereferenced: the call fails at the scale upload, before any kernel runs.
    float x_memory[64] = {}, out_memory[64] = {};
    const magi2norm::ConstTensorView x(x_memory, magi2norm::DType::f32, {1, 64}, {}, magi2norm::Memory::device);
    const magi2norm::TensorView out(out_memory, magi2norm::DType::f32, {1, 64}, {}, magi2norm::Memory::device);
    try {
        norm.forward(x, magi2norm::Grouping::none(), out, std::nullopt, magi2norm::Stream{Backend::cuda});
        ADD_FAILURE() << "a CUDA call without a driver succeeded";
    } catch (const magi2norm::Error &e) {
        EXPECT_EQ(e.code(), magi2norm::ErrorCode::device);
        EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    }
}

}  // namespace
