// Device kernels that walk one layout into another (and convert dtypes), and the
// compact temporaries they pack into and scatter out of: what CUDA's submissions
// and its peer copy run.
#pragma once

#include <memory>

#include "lib/tensor/dtype.hpp"
#include "lib/tensor/layout.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"

namespace abr::cuda {

// Runs the element walk from one device view to another of the same device
// (converting when the dtypes differ) on `stream`; the bases are the views' data.
void launch_walk(Device& device, CUstream stream, const Layout& src, CUdeviceptr src_base, const Layout& dst,
                 CUdeviceptr dst_base);

// A compact device buffer of `shape` in `dtype`, allocated, used and freed on `stream`.
struct DeviceTemp {
  DeviceTemp(const std::shared_ptr<Device>& device, CUstream stream, const Layout& like, DLDataType dtype)
      : buffer(device, like.numel * itemsize(dtype), stream),
        layout(compact_layout(like.device, dtype, like.shape, reinterpret_cast<void*>(buffer.get()))) {}
  StreamBuffer buffer;
  Layout layout;
};

}  // namespace abr::cuda
