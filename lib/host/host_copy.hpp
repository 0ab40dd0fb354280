// The host copy engine: copies between two strided views of host memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/layout.hpp"

namespace abr {

// One side of a copy: a pointer to the first element (data + byte_offset) and
// strides in elements, one per dim of the shared shape.
struct HostSide {
  const char* first;
  const int64_t* strides;
};

// Copies every element (same dtype on both sides). The source may have negative
// or zero strides; the destination must not alias itself. Source and destination
// must not overlap (callers stage through a temporary when they do).
void host_copy(HostSide src, char* dst_first, const int64_t* dst_strides, const int64_t* shape, int ndim,
               std::size_t itemsize);

// The same, converting each element from `from` to `to` (both validated).
// Throws ABR_ERR_UNSUPPORTED for a pair without a defined conversion.
void host_cast_copy(HostSide src, DLDataType from, char* dst_first, const int64_t* dst_strides, DLDataType to,
                    const int64_t* shape, int ndim);

// Copies every element of the view `src` (its shape, strides and dtype; its
// first element at `src_first`, which may be device memory mapped to the host)
// to `dst_first` with `dst_strides`, converting when `dst_dtype` differs.
void host_copy_layout(const Layout& src, const char* src_first, DLDataType dst_dtype, char* dst_first,
                      const int64_t* dst_strides);

// True if a conversion between the two dtypes is implemented.
bool can_cast(DLDataType from, DLDataType to);

}  // namespace abr
