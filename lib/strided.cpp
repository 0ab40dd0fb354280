#include "lib/strided.hpp"

#include <algorithm>

namespace abr {

StridedCopy normalize_copy(intptr_t src, const int64_t* src_strides, std::size_t src_item, intptr_t dst,
                           const int64_t* dst_strides, std::size_t dst_item, const int64_t* shape, int ndim) {
  StridedCopy out;
  // Empty first: validation bounds the byte strides of views with elements only
  // (an empty one with huge strides overflowed below; found by the fuzzer).
  out.empty = std::any_of(shape, shape + ndim, [](int64_t extent) { return extent == 0; });
  if (out.empty) return out;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] <= 1) continue;
    Dim dim{shape[i], src_strides[i] * static_cast<int64_t>(src_item), dst_strides[i] * static_cast<int64_t>(dst_item)};
    if (dim.ds < 0) {  // walk the destination forwards: same pairs, friendlier to caches
      src += (dim.n - 1) * dim.ss;
      dst += (dim.n - 1) * dim.ds;
      dim.ss = -dim.ss;
      dim.ds = -dim.ds;
    }
    out.dims.push_back(dim);
  }
  std::stable_sort(out.dims.begin(), out.dims.end(), [](const Dim& a, const Dim& b) { return a.ds > b.ds; });
  std::vector<Dim> merged;
  for (const Dim& dim : out.dims) {
    if (!merged.empty()) {
      Dim& outer = merged.back();
      if (outer.ds == dim.ds * dim.n && outer.ss == dim.ss * dim.n) {
        outer = Dim{outer.n * dim.n, dim.ss, dim.ds};
        continue;
      }
    }
    merged.push_back(dim);
  }
  out.dims = std::move(merged);
  out.src = src;
  out.dst = dst;
  return out;
}

}  // namespace abr
