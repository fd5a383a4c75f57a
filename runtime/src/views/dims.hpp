// A view's shape or strides held inline: checking a call's views allocates nothing (a heap
// allocation per axis vector would cost a tiny call more than its checks).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::detail {

// Views of higher rank are refused with Error(shape); the norm itself takes rank 1 to 4.
constexpr std::size_t kMaxRank = 8;

class Dims {
public:
    Dims() = default;
    // `what` names the view in the error for a rank above kMaxRank.
    Dims(const std::vector<std::int64_t> &values, const char *what) {
        if (values.size() > kMaxRank) {
            throw Error(ErrorCode::shape, std::string(what) + " has rank " + std::to_string(values.size()) +
                                              "; views of rank up to " + std::to_string(kMaxRank) + " are supported");
        }
        size_ = values.size();
        std::copy(values.begin(), values.end(), values_.begin());
    }
    // `n` copies of `value`, n <= kMaxRank.
    Dims(std::size_t n, std::int64_t value) : size_(n) { std::fill_n(values_.begin(), n, value); }

    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    std::int64_t &operator[](std::size_t i) { return values_[i]; }
    std::int64_t operator[](std::size_t i) const { return values_[i]; }
    std::int64_t back() const { return values_[size_ - 1]; }
    const std::int64_t *begin() const { return values_.data(); }
    const std::int64_t *end() const { return values_.data() + size_; }

    // Removes axis 0 (a row of a view).
    void drop_front() {
        std::copy(values_.begin() + 1, values_.begin() + size_, values_.begin());
        --size_;
    }
    // Removes the last axis.
    void pop_back() { --size_; }
    // Adds an outer axis (size() < kMaxRank).
    void push_front(std::int64_t value) {
        std::copy_backward(values_.begin(), values_.begin() + size_, values_.begin() + size_ + 1);
        values_[0] = value;
        ++size_;
    }
    std::vector<std::int64_t> to_vector() const { return {begin(), end()}; }

    friend bool operator==(const Dims &a, const Dims &b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
    friend bool operator!=(const Dims &a, const Dims &b) { return !(a == b); }

private:
    std::array<std::int64_t, kMaxRank> values_{};
    std::size_t size_ = 0;
};

}  // namespace magi2norm::detail
