#include "overlap.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>

namespace magi2norm::detail {

namespace {

// Every sum and product below stays under 2^66 (a view's span is under 2^63 bytes): 128 bits
// hold them without checks.
using Wide = __int128;

Wide gcd(Wide a, Wide b) {
    while (b != 0) {
        const Wide t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// The inverse of `a` modulo `m` (coprime, m > 1), by the extended Euclid algorithm.
Wide inverse(Wide a, Wide m) {
    Wide r0 = a % m, r1 = m, s0 = 1, s1 = 0;
    while (r1 != 0) {
        const Wide q = r0 / r1;
        const Wide r = r0 - q * r1, s = s0 - q * s1;
        r0 = r1;
        r1 = r;
        s0 = s1;
        s1 = s;
    }
    return (s0 % m + m) % m;
}

// One unknown of sum(a x) = rhs: coefficient a > 0, 0 <= x <= ub.
struct Term {
    Wide a, ub;
};
constexpr std::size_t kMaxTerms = 2 * kMaxRank + 2;

// Whether sum(a_k x_k) = rhs has a solution with every x_k in [0, ub_k] (and, `nontrivial`, one
// other than x = ub / 2, the trivial solution of the self-overlap form, whose solutions come in
// pairs mirrored through it). Depth first over the terms by falling coefficient: each x_k runs
// only over the values that leave a remainder the later terms can reach (at most the sum of
// their a ub, and a multiple of their gcd), which a single congruence gives.
class Search {
public:
    Search(std::array<Term, kMaxTerms> &terms, std::size_t n, bool nontrivial, std::int64_t max_work)
        : terms_(terms), n_(n), nontrivial_(nontrivial), work_left_(max_work) {
        std::sort(terms_.begin(), terms_.begin() + n_, [](const Term &x, const Term &y) { return x.a > y.a; });
        gcd_[n_] = 0;
        reach_[n_] = 0;
        for (std::size_t k = n_; k-- > 0;) {
            gcd_[k] = gcd(terms_[k].a, gcd_[k + 1]);
            reach_[k] = reach_[k + 1] + terms_[k].a * terms_[k].ub;
        }
    }

    Sharing solve(Wide rhs) {
        if (rhs < 0 || rhs > reach_[0]) return Sharing::none;
        const bool found = n_ == 0 ? rhs == 0 && !nontrivial_ : visit(0, rhs, false);
        return found ? Sharing::shared : work_left_ < 0 ? Sharing::undecided : Sharing::none;
    }

private:
    bool visit(std::size_t k, Wide r, bool deviated) {
        const Term &t = terms_[k];
        const Wide trivial = t.ub / 2;
        if (r % gcd_[k] != 0) return false;
        if (k + 1 == n_) {
            const Wide x = r / t.a;
            return x <= t.ub && (!nontrivial_ || deviated || x != trivial);
        }
        // x with r - a x in [0, reach of the rest], and a x = r modulo the rest's gcd.
        const Wide below = r - reach_[k + 1];
        Wide lo = below <= 0 ? 0 : (below + t.a - 1) / t.a;
        const Wide hi = std::min(t.ub, r / t.a);
        // Of each mirrored pair, the one that first leaves the trivial solution upwards.
        if (nontrivial_ && !deviated) lo = std::max(lo, trivial);
        const Wide h = gcd(t.a, gcd_[k + 1]), step = gcd_[k + 1] / h;
        const Wide root = step == 1 ? 0 : (r / h) % step * inverse(t.a / h, step) % step;
        for (Wide x = lo + ((root - lo) % step + step) % step; x <= hi; x += step) {
            if (--work_left_ < 0) return false;
            if (visit(k + 1, r - t.a * x, deviated || (nontrivial_ && x != trivial))) return true;
            if (work_left_ < 0) return false;
        }
        return false;
    }

    std::array<Term, kMaxTerms> &terms_;
    std::size_t n_;
    bool nontrivial_;
    std::int64_t work_left_;
    std::array<Wide, kMaxTerms + 1> gcd_{}, reach_{};
};

// Adds the axes of a view that step (extent > 1, stride != 0) as terms of |stride| * scale.
void add_axes(std::array<Term, kMaxTerms> &terms, std::size_t &n, const Dims &shape, const Dims &strides, Wide scale) {
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] > 1 && strides[i] != 0) terms[n++] = {static_cast<Wide>(std::llabs(strides[i])) * scale, shape[i] - 1};
    }
}

// "<subject> <shared>", or where the search gave up, a refusal that says so.
std::string refusal(Sharing sharing, const std::string &subject, const std::string &shared) {
    if (sharing == Sharing::shared) return subject + " " + shared;
    return subject + ": whether it shares memory was not decided within " + std::to_string(kOverlapWork) +
           " steps of the exact test, so it is refused as if it did";
}

}  // namespace

Region host_region(const CheckedView &view, const void *data, const char *what) {
    const AddressRange r = address_range(view, data, what);
    return {nullptr, r.lo, r.hi, static_cast<std::int64_t>(dtype_size(view.dtype)), &view.shape, &view.strides};
}

Sharing shares_memory(const Region &a, const Region &b, std::int64_t max_work) {
    if (a.root != b.root || a.lo >= a.hi || b.lo >= b.hi || a.lo >= b.hi || b.lo >= a.hi) return Sharing::none;
    // A byte of both is a.lo + sum(|s| x) + e = b.hi - 1 - sum(|t| y) - f, e and f within an
    // element (negative strides reflected); or the same with a and b swapped: the smaller side.
    const Wide rhs = std::min<Wide>(b.hi - 1 - a.lo, a.hi - 1 - b.lo);
    std::array<Term, kMaxTerms> terms{};
    std::size_t n = 0;
    add_axes(terms, n, *a.shape, *a.strides, a.elem_bytes);
    add_axes(terms, n, *b.shape, *b.strides, b.elem_bytes);
    if (a.elem_bytes + b.elem_bytes > 2) terms[n++] = {1, a.elem_bytes - 1 + b.elem_bytes - 1};
    // Terms of one coefficient act as one whose bound is their sum.
    std::sort(terms.begin(), terms.begin() + n, [](const Term &x, const Term &y) { return x.a < y.a; });
    std::size_t merged = 0;
    for (std::size_t k = 0; k < n; ++k) {
        if (merged > 0 && terms[merged - 1].a == terms[k].a) {
            terms[merged - 1].ub += terms[k].ub;
        } else {
            terms[merged++] = terms[k];
        }
    }
    return Search(terms, merged, false, max_work).solve(rhs);
}

Sharing overlaps_itself(const CheckedView &view, std::int64_t max_work) {
    if (view.count <= 1) return Sharing::none;
    // Two indices i != j with sum(s (i - j)) = 0: with d = i - j + (n - 1) in [0, 2 (n - 1)],
    // sum(|s| d) = sum(|s| (n - 1)) and d other than n - 1 (strides in elements: two different
    // elements of one view overlap only where they start at the same byte).
    std::array<Term, kMaxTerms> terms{};
    std::size_t n = 0;
    add_axes(terms, n, view.shape, view.strides, 1);
    for (std::size_t i = 0; i < view.shape.size(); ++i) {
        if (view.shape[i] > 1 && view.strides[i] == 0) return Sharing::shared;
    }
    Wide rhs = 0;
    for (std::size_t k = 0; k < n; ++k) {
        for (std::size_t j = 0; j < k; ++j) {
            if (terms[j].a == terms[k].a) return Sharing::shared;  // one step on each, opposite ways
        }
        rhs += terms[k].a * terms[k].ub;
        terms[k].ub *= 2;
    }
    return Search(terms, n, true, max_work).solve(rhs);
}

void check_disjoint(const Region &a, const char *what_a, const Region &b, const char *what_b, const char *why) {
    const Sharing sharing = shares_memory(a, b);
    if (sharing == Sharing::none) return;
    const std::string pair = std::string(what_a) + " and " + what_b;
    throw Error(ErrorCode::overlap, refusal(sharing, pair + (sharing == Sharing::shared ? "" : " (may overlap)"),
                                            std::string("overlap") + (a.root ? " in the same OpenCL buffer" : "") +
                                                ": an element of one shares memory with an element of the other (" + why + ")"));
}

void check_no_self_overlap(const CheckedView &view, const char *what) {
    const Sharing sharing = overlaps_itself(view);
    if (sharing == Sharing::none) return;
    throw Error(ErrorCode::stride, refusal(sharing, std::string(what) + " " + shape_string(view.shape) + " with strides " +
                                                        shape_string(view.strides),
                                           "addresses the same memory from two of its elements"));
}

}  // namespace magi2norm::detail
