#include "cuda/walk.hpp"

#include <algorithm>

#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/host/strided.hpp"
#include "cuda/kernel_params.hpp"

namespace abr::cuda {
namespace {

int32_t element_kind(DLDataType t) {
  switch (t.code) {
    case kDLBool: return kBool8;
    case kDLInt: return t.bits == 8 ? kInt8 : t.bits == 16 ? kInt16 : t.bits == 32 ? kInt32 : kInt64;
    case kDLUInt: return t.bits == 8 ? kUInt8 : t.bits == 16 ? kUInt16 : t.bits == 32 ? kUInt32 : kUInt64;
    case kDLFloat: return t.bits == 16 ? kFloat16 : t.bits == 32 ? kFloat32 : kFloat64;
    case kDLBfloat: return kBFloat16;
    case kDLComplex: return t.bits == 64 ? kComplex64 : kComplex128;
    default: fail(ABR_ERR_UNSUPPORTED, "no CUDA conversion for {}", dtype_name(t));
  }
}

// The largest unit (1, 2, 4 or 8 bytes) dividing both addresses, every stride and the item size.
int unit_index(const StridedCopy& walk, CUdeviceptr src, CUdeviceptr dst, std::size_t itemsize) {
  uint64_t bits = itemsize | (src + static_cast<uint64_t>(walk.src)) | (dst + static_cast<uint64_t>(walk.dst));
  for (const Dim& dim : walk.dims) bits |= static_cast<uint64_t>(dim.ss) | static_cast<uint64_t>(dim.ds);
  for (int index = 3; index > 0; --index)
    if (bits % (1u << index) == 0) return index;
  return 0;
}

}  // namespace

void launch_walk(Device& device, CUstream stream, const Layout& src, CUdeviceptr src_base, const Layout& dst,
                 CUdeviceptr dst_base) {
  const StridedCopy walk = normalize_copy(static_cast<intptr_t>(src.byte_offset), src.strides.data(), src.itemsize,
                                          static_cast<intptr_t>(dst.byte_offset), dst.strides.data(), dst.itemsize,
                                          src.shape.data(), src.ndim());
  if (walk.empty) return;
  WalkParams params{};
  params.src_first = walk.src;
  params.dst_first = walk.dst;
  params.ndim = static_cast<int32_t>(walk.dims.size());
  params.count = 1;
  for (std::size_t k = 0; k < walk.dims.size(); ++k) {
    params.extent[k] = walk.dims[k].n;
    params.src_stride[k] = walk.dims[k].ss;
    params.dst_stride[k] = walk.dims[k].ds;
    params.count *= static_cast<uint64_t>(walk.dims[k].n);
  }
  const bool cast = !same_dtype(src.dtype, dst.dtype);
  CUfunction function;
  int32_t from = 0, to = 0;
  void* args[5] = {&src_base, &dst_base, &params, &from, &to};
  if (cast) {
    from = element_kind(src.dtype);
    to = element_kind(dst.dtype);
    function = device.kernel(kCastKernelName);
  } else {
    const int unit = unit_index(walk, src_base, dst_base, src.itemsize);
    params.units = static_cast<int32_t>(src.itemsize >> unit);
    function = device.kernel(kCopyKernelNames[unit]);
  }
  const uint64_t blocks = std::min<uint64_t>((params.count + kThreadsPerBlock - 1) / kThreadsPerBlock, 65535);
  device.check(device.cu().cuLaunchKernel(function, static_cast<unsigned>(blocks), 1, 1, kThreadsPerBlock, 1, 1, 0,
                                          stream, args, nullptr),
               cast ? "cuLaunchKernel(abr_cast)" : "cuLaunchKernel(abr_copy)");
}

}  // namespace abr::cuda
