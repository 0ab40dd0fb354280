// What the host passes to the kernels in kernels.cu, by value: one normalized
// strided walk (lib/host/strided.hpp) in byte offsets, and for casts the element
// kinds. Plain C layout, shared by nvcc and the host compiler.
#pragma once

#include <stdint.h>

namespace abr::cuda {

constexpr int kMaxWalkDims = 64;  // ABR_MAX_NDIM: a normalized walk never has more

struct WalkParams {
  int64_t src_first;  // byte offset of the first source element from the src pointer
  int64_t dst_first;
  uint64_t count;  // elements: the product of the extents
  int32_t ndim;    // 0 for a single element
  int32_t units;   // copy kernels: units per element (element size / unit size)
  int64_t extent[kMaxWalkDims];
  int64_t src_stride[kMaxWalkDims];  // bytes
  int64_t dst_stride[kMaxWalkDims];
};

// Element kinds for abr_cast (storage and meaning, as lib/host/host_cast.cpp).
enum ElementKind : int32_t {
  kBool8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
};

// Kernel names in the fatbin (extern "C", so unmangled).
constexpr const char* kCopyKernelNames[4] = {"abr_copy_1", "abr_copy_2", "abr_copy_4", "abr_copy_8"};
constexpr const char* kCastKernelName = "abr_cast";
constexpr unsigned kThreadsPerBlock = 256;

}  // namespace abr::cuda
