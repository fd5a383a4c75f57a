// A cache-line aligned heap buffer whose pages are touched once at creation, so that neither
// page faults nor first-touch zeroing ever land inside a timed region.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace magi2norm::measure {

class AlignedBuffer {
public:
    // `bytes` (rounded up to a whole cache line), every byte set to `fill`.
    explicit AlignedBuffer(std::size_t bytes, std::byte fill = std::byte{0}) {
        constexpr std::size_t kAlign = 64;
        const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
        data_.reset(static_cast<std::byte *>(std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded)));
        if (!data_) throw std::bad_alloc();
        std::memset(data_.get(), std::to_integer<int>(fill), rounded);
    }

    std::byte *data() const { return data_.get(); }

private:
    struct Free {
        void operator()(std::byte *p) const { std::free(p); }
    };
    std::unique_ptr<std::byte[], Free> data_;
};

}  // namespace magi2norm::measure
