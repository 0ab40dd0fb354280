#include "lib/host/strided.hpp"

#include <algorithm>

namespace abr {

StridedCopy normalize_copy(intptr_t src, const int64_t* src_strides, std::size_t src_item, intptr_t dst,
                           const int64_t* dst_strides, std::size_t dst_item, const int64_t* shape, int ndim) {
  StridedCopy out;
  // Empty first: validation bounds the byte strides of views with elements only
  // (an empty one with huge strides overflowed below; found by the fuzzer).
  out.empty = std::any_of(shape, shape + ndim, [](int64_t extent) { return extent == 0; });
  if (out.empty) return out;
  out.dims.reserve(static_cast<std::size_t>(ndim));  // the one allocation: sorted and merged in place below
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
  // A stable insertion sort by descending destination stride: a few dims, and
  // std::stable_sort's buffer was an allocation per copy.
  std::vector<Dim>& dims = out.dims;
  for (std::size_t i = 1; i < dims.size(); ++i) {
    const Dim dim = dims[i];
    std::size_t j = i;
    for (; j > 0 && dims[j - 1].ds < dim.ds; --j) dims[j] = dims[j - 1];
    dims[j] = dim;
  }
  std::size_t merged = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const Dim dim = dims[i];
    if (merged > 0) {
      Dim& outer = dims[merged - 1];
      if (outer.ds == dim.ds * dim.n && outer.ss == dim.ss * dim.n) {
        outer = Dim{outer.n * dim.n, dim.ss, dim.ds};
        continue;
      }
    }
    dims[merged++] = dim;
  }
  dims.resize(merged);
  out.src = src;
  out.dst = dst;
  return out;
}

}  // namespace abr
