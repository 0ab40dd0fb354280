// A strided copy reduced to its simplest equivalent form. Shared by the host copy
// engine (pointers) and device kernels (byte offsets into a buffer), so both
// sides walk the same normalized dims.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace abr {

struct Dim {
  int64_t n;
  int64_t ss;  // source stride in bytes
  int64_t ds;  // destination stride in bytes
};

// Size-1 dims gone, destination strides positive and descending, and dims that
// are contiguous in both views merged. It visits exactly the same (source,
// destination) element pairs as the original. `src`/`dst` are the first
// elements' addresses or byte offsets; the result's are those of the new walk.
struct StridedCopy {
  intptr_t src = 0;
  intptr_t dst = 0;
  std::vector<Dim> dims;  // outermost first
  bool empty = false;     // some extent is 0: nothing to copy
};

// Strides are in elements of src_item and dst_item bytes respectively.
StridedCopy normalize_copy(intptr_t src, const int64_t* src_strides, std::size_t src_item, intptr_t dst,
                           const int64_t* dst_strides, std::size_t dst_item, const int64_t* shape, int ndim);

}  // namespace abr
