// DLPack data types: which are valid, their size and their names.
#pragma once

#include <cstddef>
#include <string>

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

// "float32", "complex128", "bool", or "code 42 bits 7 lanes 1" for anything else.
std::string dtype_name(DLDataType dtype);

}  // namespace abr
