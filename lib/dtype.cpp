#include "dtype.hpp"

#include <fmt/format.h>

#include "error.hpp"

namespace abr {
namespace {

const char* code_name(uint8_t code) {
  switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case kDLBool: return "bool";
    case kDLFloat8_e3m4: return "float8_e3m4";
    case kDLFloat8_e4m3: return "float8_e4m3";
    case kDLFloat8_e4m3b11fnuz: return "float8_e4m3b11fnuz";
    case kDLFloat8_e4m3fn: return "float8_e4m3fn";
    case kDLFloat8_e4m3fnuz: return "float8_e4m3fnuz";
    case kDLFloat8_e5m2: return "float8_e5m2";
    case kDLFloat8_e5m2fnuz: return "float8_e5m2fnuz";
    case kDLFloat8_e8m0fnu: return "float8_e8m0fnu";
    case kDLFloat6_e2m3fn: return "float6_e2m3fn";
    case kDLFloat6_e3m2fn: return "float6_e3m2fn";
    case kDLFloat4_e2m1fn: return "float4_e2m1fn";
    default: return nullptr;
  }
}

bool bits_fit_code(uint8_t code, uint8_t bits) {
  switch (code) {
    case kDLInt:
    case kDLUInt: return bits == 8 || bits == 16 || bits == 32 || bits == 64;
    case kDLFloat: return bits == 16 || bits == 32 || bits == 64;
    case kDLBfloat: return bits == 16;
    case kDLComplex: return bits == 64 || bits == 128;
    case kDLBool: return bits == 8;
    case kDLOpaqueHandle: return bits == 64;
    case kDLFloat6_e2m3fn:
    case kDLFloat6_e3m2fn: return bits == 6;
    case kDLFloat4_e2m1fn: return bits == 4;
    default: return bits == 8;  // the float8 family
  }
}

}  // namespace

void validate_dtype(DLDataType dtype, const char* what) {
  const char* name = code_name(dtype.code);
  if (!name) fail(ABR_ERR_DLPACK_DTYPE, "{}: unknown dtype code {}", what, dtype.code);
  if (dtype.lanes != 1)
    fail(ABR_ERR_DLPACK_DTYPE, "{}: dtype {} has lanes = {}; only scalar elements (lanes = 1) are supported", what,
         name, dtype.lanes);
  if (!bits_fit_code(dtype.code, dtype.bits))
    fail(ABR_ERR_DLPACK_DTYPE, "{}: dtype {} cannot have bits = {}", what, name, dtype.bits);
  if (dtype.bits < 8)
    fail(ABR_ERR_UNSUPPORTED, "{}: sub-byte dtype {} ({} bits) is not supported yet", what, name, dtype.bits);
  if (dtype.code == kDLOpaqueHandle)
    fail(ABR_ERR_UNSUPPORTED, "{}: opaque-handle dtypes hold pointers and cannot be moved", what);
}

std::string dtype_name(DLDataType dtype) {
  const char* name = code_name(dtype.code);
  if (!name || dtype.lanes != 1) return fmt::format("code {} bits {} lanes {}", dtype.code, dtype.bits, dtype.lanes);
  switch (dtype.code) {
    case kDLInt:
    case kDLUInt:
    case kDLFloat:
    case kDLComplex: return fmt::format("{}{}", name, dtype.bits);
    case kDLBfloat: return "bfloat16";
    default: return name;
  }
}

}  // namespace abr
