// Memory for a view whose first byte, or last byte, adjoins a page that may not be touched
// (PROT_NONE): a read or write one byte past that end of the view faults.
#pragma once

#include <cstddef>
#include <cstdint>

namespace guard {

enum class Side { first, last };

// The bytes [lo, hi) of a view around its element 0 (lo <= 0 with negative strides) placed so
// that byte lo (Side::first) follows a PROT_NONE page, or byte hi - 1 (Side::last) precedes one.
// There is a PROT_NONE page on both sides; the other end lies within the mapping.
class GuardedMemory {
public:
    GuardedMemory(std::int64_t lo, std::int64_t hi, Side side);
    ~GuardedMemory();
    GuardedMemory(const GuardedMemory &) = delete;
    GuardedMemory &operator=(const GuardedMemory &) = delete;

    // Where element 0 goes.
    unsigned char *element0() const { return element0_; }

private:
    void *mapping_ = nullptr;
    std::size_t mapped_ = 0;
    unsigned char *element0_ = nullptr;
};

}  // namespace guard
