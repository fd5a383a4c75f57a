// Not a norm: a memcpy that moves as many bytes as the norm does (half read, half written),
// the yardstick of issue 3's tiny-call target (T = 1 and T = 16 within 2x of a memcpy of the
// same bytes plus 5 us). Run only for those token counts, on buffers of its own (in cache, as the
// tiny cases' are); its output is not checked.
#include <cstring>
#include <vector>

#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

class MemcpyRunner : public Runner {
public:
    explicit MemcpyRunner(const Workspace &ws)
        : src_(static_cast<std::size_t>(ws.spec().bytes_moved() / 2), std::byte{0x5a}), dst_(src_.size()) {}

    const void *run(std::size_t) override {
        std::memcpy(dst_.data(), src_.data(), src_.size());
        return dst_.data();
    }

private:
    std::vector<std::byte> src_, dst_;
};

}  // namespace

Implementation memcpy_reference() {
    Implementation impl{"memcpy", 1, [](const Case &c) { return c.tokens <= kTinyTokens; },
                        [](Workspace &ws) { return std::make_unique<MemcpyRunner>(ws); }};
    impl.computes_norm = false;
    return impl;
}

}  // namespace magi2norm::bench
