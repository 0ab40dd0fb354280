// A DLTensor after validation: every field checked, strides made explicit, and
// the element and byte arithmetic proven not to overflow. Nothing downstream of
// validate_tensor() looks at a raw DLTensor again.
#pragma once

#include <cstdint>
#include <string>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/device_kinds.hpp"
#include "lib/tensor/dims.hpp"

namespace abr {

enum class Role { Source, Destination };

struct Layout {
  DLDevice device{};
  DLDataType dtype{};
  std::size_t itemsize = 0;
  Dims shape;
  Dims strides;          // in elements, one per dim, never absent
  void* data = nullptr;  // as given (a host/device pointer or a cl_mem)
  uint64_t byte_offset = 0;
  uint64_t numel = 0;
  uint64_t nbytes = 0;               // bytes of a compact copy
  int64_t min_byte = 0;              // lowest byte touched, relative to data + byte_offset (<= 0)
  int64_t max_byte_end = 0;          // one past the highest byte touched, relative likewise
  bool compact = false;              // row-major with no gaps (size-1 dims' strides ignored)
  bool has_zero_stride = false;      // some extent > 1 has stride 0 (broadcast)
  bool has_negative_stride = false;  // some extent > 1 has a negative stride (a flipped view)

  int ndim() const { return static_cast<int>(shape.size()); }
};

// The first element's address (host memory) or handle + byte_offset as a number.
// Integer arithmetic: validation proves data + byte_offset stays in the address
// space only for tensors with elements; an empty one may carry any byte_offset
// (found by the fuzzer: UBSan "pointer overflow") and is never dereferenced.
inline const char* first_element(const Layout& layout) {
  return reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(layout.data) + layout.byte_offset);
}

// Validates `tensor` (docs/architecture/c-abi.md, "DLPack import: what validation checks").
// `what` names it in messages.
// A destination must not have zero strides on extents > 1.
Layout validate_tensor(const DLTensor& tensor, Role role, const char* what);

// The DLPack flags this library knows; a header with others is refused.
constexpr uint64_t kKnownDLPackFlags =
    DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED | DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;

// Why validate_header refused `tensor`: ABR_ERR_DLPACK_VERSION or _FLAGS.
[[noreturn]] void refuse_header(const DLManagedTensorVersioned& tensor, const char* what);

// Validates the version and flags of a managed tensor header (inline: two
// comparisons that every transfer makes).
inline void validate_header(const DLManagedTensorVersioned& tensor, const char* what) {
  if (tensor.version.major != DLPACK_MAJOR_VERSION || (tensor.flags & ~kKnownDLPackFlags)) refuse_header(tensor, what);
}

// The layout of a compact row-major tensor at `data` (byte_offset 0), for
// buffers the runtime allocates itself.
Layout compact_layout(DLDevice device, DLDataType dtype, const Dims& shape, void* data);

// Compact row-major strides (in elements) for `shape`.
Dims compact_strides(const Dims& shape);

// The bytes of one row of `view` (its elements past dim 0) in `dtype`: what a staged
// reshape of host memory moves at a time (HostLayoutSide), so the planner cuts chunks
// in whole rows. 0 for a view without elements.
uint64_t row_bytes(const Layout& view, DLDataType dtype);

// "[2, 3]" for messages.
std::string shape_string(const Dims& shape);

}  // namespace abr
