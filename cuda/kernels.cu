// The device kernels: a strided gather/scatter walk for plain copies (any element
// size, moved in the widest unit alignment allows) and one dtype-cast kernel
// with lib/host/host_cast.cpp's exact semantics. Built by nvcc into a fatbin for
// sm_80 and sm_90 plus PTX, embedded in the library (see the Makefile).
#include <stdint.h>

#include "lib/tensor/half_bits.hpp"
#include "cuda/kernel_params.hpp"

namespace {

using abr::cuda::WalkParams;

// Byte offsets of element i of the row-major walk on both sides.
__device__ inline void walk_offsets(const WalkParams& w, uint64_t i, int64_t& s, int64_t& d) {
  s = w.src_first;
  d = w.dst_first;
  for (int k = w.ndim - 1; k >= 0; --k) {
    const uint64_t n = static_cast<uint64_t>(w.extent[k]);
    const int64_t idx = static_cast<int64_t>(i % n);
    i /= n;
    s += idx * w.src_stride[k];
    d += idx * w.dst_stride[k];
  }
}

template <class Unit>
__device__ void copy_walk(const char* src, char* dst, const WalkParams& w) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < w.count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    int64_t s, d;
    walk_offsets(w, i, s, d);
    const Unit* from = reinterpret_cast<const Unit*>(src + s);
    Unit* to = reinterpret_cast<Unit*>(dst + d);
    for (int u = 0; u < w.units; ++u) to[u] = from[u];
  }
}

// An element read as what every conversion needs.
struct Value {
  double re = 0, im = 0;  // floating value (complex: both parts)
  int64_t bits = 0;       // integers: the value, sign- or zero-extended
  bool integral = false;
  bool is_unsigned = false;
  bool nonzero = false;
};

template <class T>
__device__ inline T load(const char* p) {
  T v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
__device__ inline void store(char* p, T v) {
  __builtin_memcpy(p, &v, sizeof v);
}

__device__ Value read(const char* p, int kind) {
  using namespace abr::cuda;
  Value v;
  switch (kind) {
    case kBool8:
      v.integral = true;
      v.bits = load<uint8_t>(p) ? 1 : 0;
      break;
    case kInt8:
      v.integral = true;
      v.bits = load<int8_t>(p);
      break;
    case kInt16:
      v.integral = true;
      v.bits = load<int16_t>(p);
      break;
    case kInt32:
      v.integral = true;
      v.bits = load<int32_t>(p);
      break;
    case kInt64:
      v.integral = true;
      v.bits = load<int64_t>(p);
      break;
    case kUInt8:
      v.integral = v.is_unsigned = true;
      v.bits = load<uint8_t>(p);
      break;
    case kUInt16:
      v.integral = v.is_unsigned = true;
      v.bits = load<uint16_t>(p);
      break;
    case kUInt32:
      v.integral = v.is_unsigned = true;
      v.bits = load<uint32_t>(p);
      break;
    case kUInt64:
      v.integral = v.is_unsigned = true;
      v.bits = static_cast<int64_t>(load<uint64_t>(p));
      break;
    case kFloat16: v.re = abr::half_to_float(load<uint16_t>(p)); break;
    case kBFloat16: v.re = abr::bfloat16_to_float(load<uint16_t>(p)); break;
    case kFloat32: v.re = load<float>(p); break;
    case kFloat64: v.re = load<double>(p); break;
    case kComplex64:
      v.re = load<float>(p);
      v.im = load<float>(p + 4);
      break;
    case kComplex128:
      v.re = load<double>(p);
      v.im = load<double>(p + 8);
      break;
  }
  if (v.integral) {
    v.re = v.is_unsigned ? static_cast<double>(static_cast<uint64_t>(v.bits)) : static_cast<double>(v.bits);
    v.nonzero = v.bits != 0;
  } else {
    v.nonzero = v.re != 0 || v.im != 0;
  }
  return v;
}

// Float to integer: saturate, NaN -> 0 (as lib/host/host_cast.cpp's saturate<D>).
template <class D>
__device__ inline D saturate(double v, double lo, double hi, D min, D max) {
  if (v != v) return 0;
  if (v <= lo) return min;
  if (v >= hi) return max;
  return static_cast<D>(v);
}

template <class D>
__device__ inline void store_integer(char* p, const Value& v, double lo, double hi, D min, D max) {
  store<D>(p, v.integral ? static_cast<D>(static_cast<uint64_t>(v.bits)) : saturate<D>(v.re, lo, hi, min, max));
}

// Integers to float convert directly (no double rounding for float32).
template <class F>
__device__ inline F to_float(const Value& v) {
  if (!v.integral) return static_cast<F>(v.re);
  return v.is_unsigned ? static_cast<F>(static_cast<uint64_t>(v.bits)) : static_cast<F>(v.bits);
}

// A float rounded to odd, from which half and bfloat16 round once (an integer directly,
// not through its double: as the host cast's as_float_odd).
__device__ inline float to_float_odd(const Value& v) {
  if (!v.integral) return abr::double_to_float_odd(v.re);
  return v.is_unsigned ? abr::integer_to_float_odd(static_cast<uint64_t>(v.bits)) : abr::integer_to_float_odd(v.bits);
}

__device__ void write(char* p, int kind, const Value& v) {
  using namespace abr::cuda;
  switch (kind) {
    case kBool8: store<uint8_t>(p, v.nonzero ? 1 : 0); break;
    case kInt8: store_integer<int8_t>(p, v, -128.0, 127.0, INT8_MIN, INT8_MAX); break;
    case kInt16: store_integer<int16_t>(p, v, -32768.0, 32767.0, INT16_MIN, INT16_MAX); break;
    case kInt32: store_integer<int32_t>(p, v, -2147483648.0, 2147483647.0, INT32_MIN, INT32_MAX); break;
    case kInt64:
      store_integer<int64_t>(p, v, -9223372036854775808.0, 9223372036854775807.0, INT64_MIN, INT64_MAX);
      break;
    case kUInt8: store_integer<uint8_t>(p, v, 0.0, 255.0, 0, UINT8_MAX); break;
    case kUInt16: store_integer<uint16_t>(p, v, 0.0, 65535.0, 0, UINT16_MAX); break;
    case kUInt32: store_integer<uint32_t>(p, v, 0.0, 4294967295.0, 0, UINT32_MAX); break;
    case kUInt64: store_integer<uint64_t>(p, v, 0.0, 18446744073709551615.0, 0, UINT64_MAX); break;
    case kFloat16: store<uint16_t>(p, abr::float_to_half(to_float_odd(v))); break;  // rounded once, as the host cast
    case kBFloat16: store<uint16_t>(p, abr::float_to_bfloat16(to_float_odd(v))); break;
    case kFloat32: store<float>(p, to_float<float>(v)); break;
    case kFloat64: store<double>(p, to_float<double>(v)); break;
    case kComplex64:
      store<float>(p, to_float<float>(v));
      store<float>(p + 4, static_cast<float>(v.im));
      break;
    case kComplex128:
      store<double>(p, v.re);
      store<double>(p + 8, v.im);
      break;
  }
}

}  // namespace

extern "C" {

__global__ void abr_copy_1(const char* src, char* dst, WalkParams w) { copy_walk<uint8_t>(src, dst, w); }
__global__ void abr_copy_2(const char* src, char* dst, WalkParams w) { copy_walk<uint16_t>(src, dst, w); }
__global__ void abr_copy_4(const char* src, char* dst, WalkParams w) { copy_walk<uint32_t>(src, dst, w); }
__global__ void abr_copy_8(const char* src, char* dst, WalkParams w) { copy_walk<uint64_t>(src, dst, w); }

__global__ void abr_cast(const char* src, char* dst, WalkParams w, int32_t from, int32_t to) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < w.count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    int64_t s, d;
    walk_offsets(w, i, s, d);
    write(dst + d, to, read(src + s, from));
  }
}

}  // extern "C"
