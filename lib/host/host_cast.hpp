// Element-wise dtype conversion on the host, one strided row at a time.
#pragma once

#include <cstdint>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/half_bits.hpp"

namespace abr {

// Converts n elements: src advances by src_stride bytes, dst by dst_stride bytes.
using CastRowFn = void (*)(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t n);

// The row converter for a pair of validated dtypes, or nullptr if none exists.
// Supported: bool, int8-64, uint8-64, float16, bfloat16, float32/64, complex64/128.
// Semantics: integers wrap like C; floats to integers saturate (NaN -> 0);
// complex to real keeps the real part; anything to bool is (x != 0).
CastRowFn cast_row_or_null(DLDataType from, DLDataType to);

// The same, throwing ABR_ERR_UNSUPPORTED with both dtype names when none exists.
CastRowFn cast_row_for(DLDataType from, DLDataType to);

}  // namespace abr
