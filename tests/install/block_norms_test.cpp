// The host example's norms are right: each output, computed through a checkpoint, a dispatcher
// or per-token ids, meets SPEC.md's gates against the reference applied to the same input and
// the weight as stored in the checkpoint. With install.package (the installed build prints the
// build tree's checksum) this pins what the installed example computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "block_norms.hpp"
#include "magi2norm/safetensors.hpp"
#include "reference/gates.hpp"
#include "reference/reference.hpp"

namespace {

TEST(HostExample, EveryNormMeetsTheContract) {
    const std::string path = testing::TempDir() + "magi2norm_block_norms.safetensors";
    block_norms::write_checkpoint(path);
    const std::vector<block_norms::Step> steps = block_norms::run(path);
    const auto file = magi2norm::safetensors::File::open(path);

    ASSERT_EQ(steps.size(), 4u);
    for (const block_norms::Step &step : steps) {
        SCOPED_TRACE(step.module);
        const magi2norm::NormConfig &c = step.config;
        if (c.num_modality > 1) {
            // Every modality present and the tokens not already sorted: the grouping is exercised.
            EXPECT_EQ(std::set<std::int32_t>(step.modality.begin(), step.modality.end()).size(),
                      static_cast<std::size_t>(c.num_modality));
            EXPECT_FALSE(std::is_sorted(step.modality.begin(), step.modality.end()));
        }
        const ref::HostTensor y32 = ref::rms_norm({c.dim, c.eps, c.num_modality, c.num_patterns},
                                                  file.view(block_norms::kLayerPrefix + step.module + ".weight"),
                                                  step.x.view(), step.modality);
        if (step.y.dtype == magi2norm::DType::f32) {
            EXPECT_TRUE(ref::gate1_close(step.y.view(), y32.view()));
        } else {
            EXPECT_TRUE(ref::gate3_within_local_ulp(step.y.view(), y32.cast(step.y.dtype).view()));
        }
    }
}

TEST(HostExample, ChecksumCoversEveryOutputByte) {
    const std::string path = testing::TempDir() + "magi2norm_block_norms_checksum.safetensors";
    block_norms::write_checkpoint(path);
    std::vector<block_norms::Step> steps = block_norms::run(path);
    const std::uint64_t original = block_norms::checksum(steps);
    EXPECT_EQ(original, block_norms::checksum(block_norms::run(path)));
    steps.back().y.bytes.back() ^= 1;
    EXPECT_NE(original, block_norms::checksum(steps));
}

}  // namespace
