// DLPack data types: which are valid, their size and their names.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "arraybridge/arraybridge.h"

namespace abr {

// Throws ABR_ERR_DLPACK_DTYPE for a malformed dtype and ABR_ERR_UNSUPPORTED for a
// valid one this library cannot move (sub-byte floats, opaque handles). `what`
// names the tensor in the message.
void validate_dtype(DLDataType dtype, const char* what);

// Bytes per element of a validated dtype.
inline std::size_t itemsize(DLDataType dtype) { return static_cast<std::size_t>(dtype.bits / 8) * dtype.lanes; }

inline bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

inline bool is_zero_dtype(DLDataType d) { return d.code == 0 && d.bits == 0 && d.lanes == 0; }

// "float32", "complex128", "bool", "float8_e4m3fn", "float32x4" (lanes), or
// "dlpack_dtype_42_7" for a code without a name.
std::string dtype_name(DLDataType dtype);

// The inverse of dtype_name for named codes; case and blanks are ignored. Only
// the spelling is checked (validate_dtype judges the result). Throws
// ABR_ERR_INVALID_ARGUMENT naming the text.
DLDataType parse_dtype(std::string_view text);

}  // namespace abr
