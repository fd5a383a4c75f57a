// Not a norm: memcpy of the case's input into its output buffer, the yardstick of issue 3's
// tiny-call target (T = 1 and T = 16 within 2x of a memcpy of the same bytes plus 5 us). Run
// only for those token counts; its output is not checked (it is the input's bytes).
#include <cstring>

#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

class MemcpyRunner : public Runner {
public:
    explicit MemcpyRunner(Workspace &ws)
        : ws_(ws), bytes_(static_cast<std::size_t>(ws.spec().elements()) * dtype_size(ws.spec().in)) {}

    const void *run(std::size_t pair) override {
        std::memcpy(ws_.out(pair), ws_.x(pair), bytes_);
        return ws_.out(pair);
    }

private:
    Workspace &ws_;
    std::size_t bytes_;
};

}  // namespace

Implementation memcpy_reference() {
    Implementation impl{"memcpy", 1, [](const Case &c) { return c.tokens <= kTinyTokens; },
                        [](Workspace &ws) { return std::make_unique<MemcpyRunner>(ws); }};
    impl.computes_norm = false;
    return impl;
}

}  // namespace magi2norm::bench
