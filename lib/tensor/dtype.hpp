// DLPack data types: which are valid, their size and their names.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "arraybridge/arraybridge.h"

namespace abr {

// Throws ABR_ERR_DLPACK_DTYPE for a malformed dtype and ABR_ERR_UNSUPPORTED for a
// valid one this library cannot move (sub-byte floats not packed into whole bytes,
// opaque handles). `what`
// names the tensor in the message. check_dtype is the whole check, which
// validate_dtype skips for the usual dtypes.
void check_dtype(DLDataType dtype, const char* what);
inline void validate_dtype(DLDataType dtype, const char* what) {
  // Scalar ints of 8-64 bits and floats of 16-64, nearly every tensor, pass inline.
  const unsigned bits = dtype.bits;
  const bool power = (bits & (bits - 1)) == 0 && bits <= 64;
  const bool usual = dtype.lanes == 1 && power &&
      ((dtype.code == kDLInt || dtype.code == kDLUInt) ? bits >= 8 : dtype.code == kDLFloat && bits >= 16);
  if (!usual) check_dtype(dtype, what);
}

// Bytes per element of a validated dtype.
inline std::size_t itemsize(DLDataType dtype) { return static_cast<std::size_t>(dtype.bits) * dtype.lanes / 8; }

inline bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

inline bool is_zero_dtype(DLDataType d) { return d.code == 0 && d.bits == 0 && d.lanes == 0; }
// float64 or complex128: what a device kernel converts only with double precision (cl_khr_fp64).
inline bool needs_double_precision(DLDataType t) {
  return (t.code == kDLFloat && t.bits == 64) || (t.code == kDLComplex && t.bits == 128);
}

// Whether `casting` (not ABR_CASTING_DEFAULT: the planner resolves it) lets `from`
// become `to`, as NumPy's can_cast judges it: kinds rank bool < unsigned < signed <
// float < complex, and SAFE asks that `to` hold every value of `from`.
bool casting_allows(abr_casting casting, DLDataType from, DLDataType to);
// What the cast from `from` to `to` may change, in words ("the imaginary part is
// dropped"), for the refusal's message.
const char* cast_loses(DLDataType from, DLDataType to);

// "float32", "complex128", "bool", "float8_e4m3fn", "float32x4" (lanes), or
// "dlpack_dtype_42_7" for a code without a name.
std::string dtype_name(DLDataType dtype);

// Refuses (ABR_ERR_INVALID_ARGUMENT) a dtype whose dtype_name parse_dtype would not
// read back as itself (bits or lanes 0, opaque8): abr_dtype_format writes only names.
void check_nameable(DLDataType dtype);

// The inverse of dtype_name, "dlpack_dtype_42_7" included; case and leading and
// trailing blanks are ignored. Only the spelling is checked (validate_dtype judges
// the result). Throws ABR_ERR_INVALID_ARGUMENT naming the text.
DLDataType parse_dtype(std::string_view text);

}  // namespace abr
