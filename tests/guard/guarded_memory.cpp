#include "guarded_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace guard {

GuardedMemory::GuardedMemory(std::int64_t lo, std::int64_t hi, Side side) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const auto bytes = static_cast<std::size_t>(hi - lo);
    const std::size_t usable = (bytes + page - 1) / page * page;
    mapped_ = usable + 2 * page;
    mapping_ = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    auto *base = static_cast<unsigned char *>(mapping_);
    if (mprotect(base, page, PROT_NONE) != 0 || mprotect(base + page + usable, page, PROT_NONE) != 0) {
        throw std::runtime_error("mprotect failed");
    }
    // Bytes the view does not cover hold 0xAB, as a poisoned output would.
    std::memset(base + page, 0xAB, usable);
    unsigned char *first = side == Side::first ? base + page : base + page + usable - bytes;
    element0_ = first - lo;
}

GuardedMemory::~GuardedMemory() { munmap(mapping_, mapped_); }

}  // namespace guard
