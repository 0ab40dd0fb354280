#include "lib/tensor/dtype.hpp"

#include <cctype>
#include <string>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/text.hpp"

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
    case kDLComplex: return bits == 32 || bits == 64 || bits == 128;  // 32: two float16 (torch.complex32)
    case kDLBool: return bits == 8;
    case kDLOpaqueHandle: return bits == 64;
    case kDLFloat6_e2m3fn:
    case kDLFloat6_e3m2fn: return bits == 6;
    case kDLFloat4_e2m1fn: return bits == 4;
    default: return bits == 8;  // the float8 family
  }
}

// Codes whose names take the bits as a suffix ("float32"); the others' names say them.
bool named_by_bits(uint8_t code) {
  return code == kDLInt || code == kDLUInt || code == kDLFloat || code == kDLBfloat || code == kDLComplex;
}

// NumPy's order of kinds; -1 for dtypes of no kind (the float8 family, opaque handles).
int kind_rank(DLDataType t) {
  switch (t.code) {
    case kDLBool: return 0;
    case kDLUInt: return 1;
    case kDLInt: return 2;
    case kDLFloat:
    case kDLBfloat: return 3;
    case kDLComplex: return 4;
    default: return -1;
  }
}

// A float's significand digits (the implicit bit counted) and largest binary exponent;
// a complex number's are its parts'.
struct FloatRange {
  int digits;
  int max_exponent;
};
FloatRange float_range(DLDataType t) {
  const int bits = t.code == kDLComplex ? t.bits / 2 : t.bits;
  if (t.code == kDLBfloat) return {8, 128};
  return bits == 16 ? FloatRange{11, 16} : bits == 32 ? FloatRange{24, 128} : FloatRange{53, 1024};
}

// Whether `to` holds every value of `from` (NumPy's casting='safe').
bool holds_every_value(DLDataType from, DLDataType to) {
  const int rank_from = kind_rank(from), rank_to = kind_rank(to);
  if (rank_from < 0 || rank_to < rank_from) return false;
  if (rank_from == 0) return true;  // bool is 0 or 1 in every dtype
  if (rank_from <= 2) {             // integers: their value bits against the bits or digits of `to`
    const int value_bits = rank_from == 1 ? from.bits : from.bits - 1;
    if (rank_to == 1) return to.bits >= from.bits;
    if (rank_to == 2) return to.bits - 1 >= value_bits;
    return float_range(to).digits >= value_bits;
  }
  const FloatRange a = float_range(from), b = float_range(to);
  return b.digits >= a.digits && b.max_exponent >= a.max_exponent;
}

}  // namespace

bool casting_allows(abr_casting casting, DLDataType from, DLDataType to) {
  if (same_dtype(from, to)) return true;
  switch (casting) {
    case ABR_CASTING_NO: return false;
    case ABR_CASTING_SAFE: return holds_every_value(from, to);
    case ABR_CASTING_SAME_KIND: return kind_rank(from) >= 0 && kind_rank(to) >= kind_rank(from);  // SAFE is within
    default: return true;
  }
}

const char* cast_loses(DLDataType from, DLDataType to) {
  const int rank_from = kind_rank(from), rank_to = kind_rank(to);
  if (rank_to == 0) return "every value becomes x != 0";
  if (rank_from == 4 && rank_to < 3)
    return "the imaginary part is dropped, fractions are cut, and values out of range saturate";
  if (rank_from == 4 && rank_to == 3) return "the imaginary part is dropped";
  if (rank_from == 3 && rank_to < 3) return "fractions are cut, and values out of range saturate";
  if (rank_from == 2 && rank_to == 1)
    return to.bits >= from.bits ? "negative values wrap" : "negative values and those out of range wrap";
  if (rank_to <= 2) return "values out of range wrap";
  const FloatRange b = float_range(to);
  if (rank_from <= 2) {  // an integer into a float: too few digits, and into float16 too little range
    const int value_bits = rank_from == 1 ? from.bits : from.bits - 1;
    return value_bits >= b.max_exponent ? "integers past the float's digits round, and those past its range become inf"
                                        : "integers past the float's digits round";
  }
  const FloatRange a = float_range(from);
  if (b.digits >= a.digits) return "values out of range overflow";
  return b.max_exponent >= a.max_exponent ? "values round" : "values round, and those out of range overflow";
}

void check_dtype(DLDataType dtype, const char* what) {
  const char* name = code_name(dtype.code);
  if (!name) fail(ABR_ERR_DLPACK_DTYPE, "{}: unknown dtype code {}", what, dtype.code);
  if (!bits_fit_code(dtype.code, dtype.bits))
    fail(ABR_ERR_DLPACK_DTYPE, "{}: dtype {} cannot have bits = {}", what, name, dtype.bits);
  // Sub-byte types move as one byte of packed lanes (torch's float4_e2m1fn_x2 is
  // float4_e2m1fn with lanes = 2); other vector types are not supported (the host
  // engine moves elements of 1, 2, 4, 8 and 16 bytes).
  const bool packed = dtype.bits < 8 && dtype.lanes > 1 && dtype.bits * dtype.lanes == 8;
  if (dtype.lanes != 1 && !packed)
    fail(ABR_ERR_DLPACK_DTYPE,
         "{}: dtype {} has lanes = {}; only scalar elements (lanes = 1) and sub-byte lanes "
         "packed into one byte are supported",
         what, name, dtype.lanes);
  if (dtype.bits * dtype.lanes % 8 != 0)
    fail(ABR_ERR_UNSUPPORTED,
         "{}: sub-byte dtype {} ({} bits) moves only as lanes packed into one byte "
         "(as float4_e2m1fnx2)",
         what, name, dtype.bits);
  if (dtype.code == kDLOpaqueHandle)
    fail(ABR_ERR_UNSUPPORTED, "{}: opaque-handle dtypes hold pointers and cannot be moved", what);
}

std::string dtype_name(DLDataType dtype) {
  const char* name = code_name(dtype.code);
  std::string base;
  if (!name)
    base = fmt::format("dlpack_dtype_{}_{}", dtype.code, dtype.bits);
  else if (dtype.code == kDLBool && dtype.bits == 8)
    base = "bool";
  else if (named_by_bits(dtype.code) || !bits_fit_code(dtype.code, dtype.bits))
    base = fmt::format("{}{}", name, dtype.bits);
  else
    base = name;  // the float8/6/4 family and opaque handles: the name says the bits
  return dtype.lanes == 1 ? base : fmt::format("{}x{}", base, dtype.lanes);
}

void check_nameable(DLDataType dtype) {
  const std::string name = dtype_name(dtype);
  bool reads_back = false;
  try {
    reads_back = same_dtype(parse_dtype(name), dtype);
  } catch (const Error&) {
  }
  if (!reads_back)
    fail(ABR_ERR_INVALID_ARGUMENT, "dtype (code {}, bits {}, lanes {}) has no name: \"{}\" would not read back as it",
         dtype.code, dtype.bits, dtype.lanes, name);
}

DLDataType parse_dtype(std::string_view text) {
  std::string clean = normalized_name(text);
  auto refuse = [&]() -> DLDataType {
    fail(ABR_ERR_INVALID_ARGUMENT,
         "unknown dtype '{}'; expected a name such as 'float32', 'uint8', 'bool', "
         "'bfloat16', 'complex64' or 'float8_e4m3fn', optionally with lanes ('float32x4')",
         text);
  };
  // Lanes: a trailing "x<digits>" after the bits, or after a name that says them
  // ("float4_e2m1fnx2"); not the x of "complex".
  uint16_t lanes = 1;
  const std::size_t x = clean.rfind('x');
  const bool after_bits = x != std::string::npos && x > 0 && std::isdigit(static_cast<unsigned char>(clean[x - 1]));
  const bool after_name = x != std::string::npos && clean.compare(0, 5, "float") == 0 && clean.find('_') < x;
  if ((after_bits || after_name) && x + 1 < clean.size()) {
    uint64_t value = 0;
    if (!parse_decimal(std::string_view(clean).substr(x + 1), 0xFFFF, &value) || value == 0) return refuse();
    lanes = static_cast<uint16_t>(value);
    clean.resize(x);
  }
  if (clean == "bool") return {kDLBool, 8, lanes};
  constexpr std::string_view kUnnamed = "dlpack_dtype_";  // dtype_name's form for a code without a name
  if (clean.compare(0, kUnnamed.size(), kUnnamed) == 0) {
    const std::string_view rest = std::string_view(clean).substr(kUnnamed.size());
    const std::size_t cut = rest.find('_');
    uint64_t code = 0, bits = 0;
    if (cut == std::string_view::npos || !parse_decimal(rest.substr(0, cut), 255, &code) ||
        !parse_decimal(rest.substr(cut + 1), 255, &bits) || bits == 0)
      return refuse();
    return {static_cast<uint8_t>(code), static_cast<uint8_t>(bits), lanes};
  }
  for (int code = 0; code < 256; ++code) {
    const char* name = code_name(static_cast<uint8_t>(code));
    if (!name) continue;
    const std::string_view prefix(name);
    if (!named_by_bits(static_cast<uint8_t>(code)) && code != kDLBool) {
      if (clean == prefix)  // the float8/6/4 family: the bits come with the name
        for (uint8_t bits : {4, 6, 8, 64})
          if (bits_fit_code(static_cast<uint8_t>(code), bits)) return {static_cast<uint8_t>(code), bits, lanes};
      continue;
    }
    if (clean.size() <= prefix.size() || clean.compare(0, prefix.size(), prefix) != 0) continue;
    uint64_t bits = 0;
    if (parse_decimal(std::string_view(clean).substr(prefix.size()), 255, &bits) && bits > 0)
      return {static_cast<uint8_t>(code), static_cast<uint8_t>(bits), lanes};
  }
  return refuse();
}

}  // namespace abr
