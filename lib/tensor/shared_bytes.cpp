#include "lib/tensor/shared_bytes.hpp"

#include <algorithm>

namespace abr {
namespace {

// 128 bits: sums over both views' spans (each proven to fit 64 bits) cannot overflow.
using Wide = __int128;

// One term c * y of the sum, y in [0, most], c > 0.
struct Term {
  Wide c;
  Wide most;
};

constexpr int kMaxTerms = 2 * ABR_MAX_NDIM;
constexpr int kMaxWork = 4096;  // search nodes before answering "may share"

struct Search {
  Term terms[kMaxTerms];
  Wide reach[kMaxTerms + 1];  // reach[t]: the most terms t.. can add
  int count = 0;
  int work = 0;

  // Whether some choice of terms t.. sums into [lo, hi]; true past the bound.
  bool hits(int t, Wide lo, Wide hi) {
    if (hi < 0 || lo > reach[t]) return false;
    if (t == count) return lo <= 0;  // 0 <= hi here
    if (++work > kMaxWork) return true;
    const Term& term = terms[t];
    // y must leave [lo - c*y, hi - c*y] within reach of the terms after it: [0, reach[t + 1]].
    const Wide below = lo - reach[t + 1];
    const Wide first = below <= 0 ? 0 : (below + term.c - 1) / term.c;
    const Wide last = std::min(term.most, hi / term.c);
    for (Wide y = first; y <= last; ++y)
      if (hits(t + 1, lo - term.c * y, hi - term.c * y)) return true;
    return false;
  }

  // Sorts the terms by step, largest first, and merges equal steps into one: c*y1 + c*y2
  // reaches every c*k, k up to both bounds (x[0::2] against x[1::2] searched n/2 values of
  // y before, and gave up past 8K elements). Then fills `reach`.
  void settle() {
    std::sort(terms, terms + count, [](const Term& x, const Term& y) { return x.c > y.c; });
    int merged = 0;
    for (int t = 0; t < count; ++t) {
      if (merged > 0 && terms[merged - 1].c == terms[t].c)
        terms[merged - 1].most += terms[t].most;
      else
        terms[merged++] = terms[t];
    }
    count = merged;
    reach[count] = 0;
    for (int t = count - 1; t >= 0; --t) reach[t] = reach[t + 1] + terms[t].c * terms[t].most;
  }
};

// Adds view's terms with `sign`, each a step of one dimension in bytes; a negative step
// c*y becomes c*most - |c|*(most - y): its constant goes into `offset`.
void add_terms(Search& search, const Layout& view, int sign, Wide& offset) {
  for (int k = 0; k < view.ndim(); ++k) {
    const Wide most = view.shape[k] - 1;
    const Wide c = Wide{sign} * view.strides[k] * static_cast<int64_t>(view.itemsize);
    if (most <= 0 || c == 0) continue;
    if (c < 0) offset += c * most;
    search.terms[search.count++] = {c < 0 ? -c : c, most};
  }
}

}  // namespace

bool lattices_share_bytes(const Layout& a, uintptr_t a_base, const Layout& b, uintptr_t b_base) {
  const Wide a_first = Wide{a_base} + a.byte_offset, b_first = Wide{b_base} + b.byte_offset;
  // Some element i of a and j of b meet: a_first + sum(i*sa) + p == b_first + sum(j*sb) + q for
  // bytes p < a.itemsize and q < b.itemsize, that is sum(i*sa) - sum(j*sb) in [lo, hi] below.
  Search search;
  Wide offset = 0;
  add_terms(search, a, 1, offset);
  add_terms(search, b, -1, offset);
  search.settle();
  const Wide delta = b_first - a_first - offset;
  return search.hits(0, delta - static_cast<int64_t>(a.itemsize) + 1, delta + static_cast<int64_t>(b.itemsize) - 1);
}

Sharing elements_share_bytes(const Layout& view) {
  // Two elements i != j meet when d = i - j, each d_k in [-most_k, most_k], has
  // |sum(d_k * c_k)| < itemsize. With d or -d, the first nonzero d_j (in a fixed order) is
  // positive: for each j, d_j in [1, most_j], the dimensions before j add nothing and those
  // after it d_k = y_k - most_k, y_k in [0, 2 * most_k] (the search's terms).
  struct Dim {
    Wide c, most;
  } dims[ABR_MAX_NDIM];
  int n = 0;
  for (int k = 0; k < view.ndim(); ++k) {
    if (view.shape[k] <= 1) continue;
    const Wide c = Wide{view.strides[k]} * static_cast<int64_t>(view.itemsize);
    if (c == 0) return Sharing::Share;
    dims[n++] = {c < 0 ? -c : c, Wide{view.shape[k]} - 1};
  }
  // Largest step first: a first nonzero d_j of a small step ranges over many values (a
  // (5000, 2) view of steps (2, 10001) gave up where its transpose answered at once).
  std::sort(dims, dims + n, [](const Dim& a, const Dim& b) { return a.c > b.c; });
  const Wide within = static_cast<int64_t>(view.itemsize) - 1;  // |distance| in bytes that still meets
  Wide span = within + 1, numel = 1;  // more elements than the bytes they span can hold: two meet
  for (int k = 0; k < n; ++k) {
    span += dims[k].c * dims[k].most;
    numel *= dims[k].most + 1;
  }
  if (numel * (within + 1) > span) return Sharing::Share;
  int work = 0;
  for (int j = 0; j < n; ++j) {
    Search search;
    Wide middle = 0;  // sum of c_k * most_k after j: where y_k = most_k (d_k = 0) puts the sum
    for (int k = j + 1; k < n; ++k) {
      search.terms[search.count++] = {dims[k].c, 2 * dims[k].most};
      middle += dims[k].c * dims[k].most;
    }
    search.settle();
    for (Wide d = 1; d <= dims[j].most && d * dims[j].c <= within + middle; ++d) {
      const Wide at = middle - d * dims[j].c;
      const bool hit = search.hits(0, at - within, at + within);
      work += search.work + 1;
      search.work = 0;
      if (work > kMaxWork) return Sharing::Unknown;
      if (hit) return Sharing::Share;
    }
  }
  return Sharing::Apart;
}

}  // namespace abr
