// last_variant(): the AOT variant a thread's last kernel ran, for hosts that tune or profile the
// norm (which variant took a call; the streaming test relies on it too).
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "norm_case.hpp"
#include "random_values.hpp"
#include "throws_error.hpp"

namespace contract {
namespace {

TEST(LastVariant, NamesTheVariantOfEachCallPerThread) {
    const magi2norm::Backend backend = magi2norm::default_backend();
    std::string before_any;
    std::thread([&] { before_any = magi2norm::last_variant(); }).join();
    EXPECT_EQ(before_any, "") << "a thread that has run no kernel";

    Rng rng(5);
    const ref::HostTensor x = random_input(DType::f32, {8, 64}, rng);
    const magi2norm::RMSNorm norm({64, 1e-6f, 1, 1, DType::bf16});
    ref::HostTensor out(DType::bf16, {8, 64}), out32(DType::f32, {8, 64});
    norm.forward(x.view(), magi2norm::Grouping::none(), out.view());
    EXPECT_TRUE(ran_variant(backend, DType::f32, DType::bf16, false));
    norm.forward(x.view(), magi2norm::Grouping::none(), out32.view(), DType::f32);
    EXPECT_TRUE(ran_variant(backend, DType::f32, DType::f32, false));

    // A refused call runs nothing and leaves the name as it was.
    const ref::HostTensor wrong_width = random_input(DType::bf16, {8, 32}, rng);
    EXPECT_TRUE(throws_error([&] { norm.forward(wrong_width.view(), magi2norm::Grouping::none(), out.view()); },
                             magi2norm::ErrorCode::shape, {"dim", "64"}));
    EXPECT_TRUE(ran_variant(backend, DType::f32, DType::f32, false));

    // Another thread's calls do not change this thread's name.
    std::thread([&] { norm.forward(x.view(), magi2norm::Grouping::none(), out.view()); }).join();
    EXPECT_TRUE(ran_variant(backend, DType::f32, DType::f32, false));
}

}  // namespace
}  // namespace contract
