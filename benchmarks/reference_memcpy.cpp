// Not a norm: a memcpy that moves as many bytes as the norm does (half read, half written), the
// yardstick of the tiny-call target (T = 1 and T = 16 within 2x of a memcpy of the same bytes
// plus 5 us). Run only for those token counts, on buffers of its own (in cache, as the tiny
// cases' are); its output is not checked.
#include <cstring>
#include <vector>

#include "implementation.hpp"

namespace magi2norm::bench {

namespace {

class MemcpyRunner : public Runner {
public:
    // Source and destination share one allocation, the destination half a page off the
    // source's alignment: equal addresses modulo 4 KiB (two fresh page-aligned allocations)
    // make loads wait on unrelated stores (4K aliasing), and a 393 KB copy took 157 us.
    explicit MemcpyRunner(const Workspace &ws)
        : bytes_(static_cast<std::size_t>(ws.spec().bytes_moved() / 2)),
          buffer_(2 * bytes_ + kPage + kPage / 2, std::byte{0x5a}),
          dst_offset_((bytes_ + kPage - 1) / kPage * kPage + kPage / 2) {}

    const void *run(std::size_t) override {
        std::memcpy(buffer_.data() + dst_offset_, buffer_.data(), bytes_);
        return buffer_.data() + dst_offset_;
    }

private:
    static constexpr std::size_t kPage = 4096;
    std::size_t bytes_;
    std::vector<std::byte> buffer_;
    std::size_t dst_offset_;
};

}  // namespace

Implementation memcpy_reference() {
    Implementation impl{"memcpy", 1, [](const Case &c) { return c.tokens <= kTinyTokens; },
                        [](Workspace &ws) { return std::make_unique<MemcpyRunner>(ws); }};
    impl.computes_norm = false;
    return impl;
}

}  // namespace magi2norm::bench
