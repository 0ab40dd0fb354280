// IEEE binary16 and bfloat16 conversions by their bits (round to nearest even,
// NaN kept quiet), shared by the host cast and the CUDA kernels so that both
// convert bit for bit alike.
#pragma once

#include <stdint.h>

#ifdef __CUDACC__
#define ABR_HOST_DEVICE __host__ __device__
#else
#define ABR_HOST_DEVICE
#endif

namespace abr {

ABR_HOST_DEVICE inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // inf or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal half: normalize
    uint32_t e = 113;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
  }
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

ABR_HOST_DEVICE inline uint16_t float_to_half(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u)  // inf or NaN (keep NaN quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past the largest half
  if (abs < 0x38800000u) {                                               // subnormal or zero in half
    if (abs < 0x33000000u) return sign;                                  // below half the smallest subnormal
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

ABR_HOST_DEVICE inline float bfloat16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

ABR_HOST_DEVICE inline uint16_t float_to_bfloat16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// A double as a float rounded to odd: where inexact, the neighbour toward zero with its
// last bit set. Narrowed on to half or bfloat16 (round to nearest even) it rounds once,
// as a direct conversion does, since a float keeps more than the 2 extra bits that
// needs; through a float rounded to nearest, 1 + 2^-11 + 2^-40 became 1.0, not 1.001.
ABR_HOST_DEVICE inline float double_to_float_odd(double d) {
  float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  if (d != d || back == d) return f;  // NaN, or exact
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof bits);
  if ((back < 0 ? -back : back) > (d < 0 ? -d : d)) --bits;  // rounded away from zero: step back (magnitude bits)
  bits |= 1u;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

// An integer as a float rounded to odd, without a double between: an int64 above 2^53
// rounds once on its way into a double, so half or bfloat16 after it rounded twice
// (2^60 + 2^52 + 1 became 2^60 as bfloat16, not 2^60 + 2^53). `magnitude` < 2^24 is exact.
ABR_HOST_DEVICE inline float integer_to_float_odd(uint64_t magnitude, bool negative) {
  if (magnitude == 0) return negative ? -0.0f : 0.0f;
#ifdef __CUDA_ARCH__
  const int width = 64 - __clzll(static_cast<long long>(magnitude));
#else
  const int width = 64 - __builtin_clzll(magnitude);
#endif
  const int shift = width > 24 ? width - 24 : 0;  // the bits a float cannot keep
  uint64_t kept = magnitude >> shift;
  if ((kept << shift) != magnitude) kept |= 1u;  // any dropped bit: odd
  const uint32_t scale_bits = static_cast<uint32_t>(127 + shift) << 23;
  float scale;
  __builtin_memcpy(&scale, &scale_bits, sizeof scale);
  const float f = static_cast<float>(kept) * scale;  // exact: 24 bits times a power of two
  return negative ? -f : f;
}

// Up to 2^53 a double holds the integer exactly, and the double's path is the faster one
// (it vectorizes): the bits are counted only above.
ABR_HOST_DEVICE inline float integer_to_float_odd(int64_t v) {
  constexpr int64_t kExact = int64_t{1} << 53;
  if (v > -kExact && v < kExact) return double_to_float_odd(static_cast<double>(v));
  return integer_to_float_odd(v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v), v < 0);
}

ABR_HOST_DEVICE inline float integer_to_float_odd(uint64_t v) {
  if (v < (uint64_t{1} << 53)) return double_to_float_odd(static_cast<double>(v));
  return integer_to_float_odd(v, false);
}

}  // namespace abr
