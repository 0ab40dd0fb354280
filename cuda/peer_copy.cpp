#include "cuda/peer_copy.hpp"

#include "lib/base/log.hpp"
#include "cuda/stream.hpp"
#include "cuda/walk.hpp"

namespace abr::cuda {
namespace {

CUdeviceptr device_first(const Layout& layout) {
  return reinterpret_cast<CUdeviceptr>(layout.data) + layout.byte_offset;
}

}  // namespace

// Between two CUDA devices: packed on the source device when needed, one peer
// copy (the driver goes direct where peer access is on), scattered on the
// destination device when needed. The source side's temporary lives on the
// source device's stream, so the copy on the destination's stream is ordered
// after the pack, and the temporary's free after the copy, by events.
void peer_copy(const Layout& src, const Layout& dst, Stream* stream, PeerSteps steps,
               const std::shared_ptr<Device>& src_device, const std::shared_ptr<Device>& dst_device) {
  if (stream) stream->synchronize();
  if (src.numel == 0) return;
  const uint64_t bytes = src.numel * dst.itemsize;
  Device& from = *src_device;
  Device& to = *dst_device;
  std::unique_ptr<DeviceTemp> packed;
  CUdeviceptr source = device_first(src);
  if (steps.pack_on_source) {
    Scope scope(from);
    packed = std::make_unique<DeviceTemp>(src_device, from.own_stream(), src, dst.dtype);
    launch_walk(from, from.own_stream(), src, reinterpret_cast<CUdeviceptr>(src.data), packed->layout,
                packed->buffer.get());
    source = packed->buffer.get();
    order_after(src_device, from.own_stream(), to, to.own_stream());
  }
  Scope scope(to);
  // Made before the copy is queued: the packed source's free must be ordered after
  // the copy even when a later step fails, and then no event may be missing.
  std::unique_ptr<StreamEvent> copied;
  if (packed) copied = create_event(dst_device);
  const auto free_packed_after_copy = [&]() {
    if (!packed) return;
    order_after(*copied, to.own_stream(), from, from.own_stream());
    packed.reset();  // freed on the source's stream, after the copy
  };
  try {
    std::unique_ptr<DeviceTemp> landing;
    CUdeviceptr target = device_first(dst);
    if (steps.scatter_on_destination) {
      landing = std::make_unique<DeviceTemp>(dst_device, to.own_stream(), dst, dst.dtype);
      target = landing->buffer.get();
    }
    to.check(to.cu().cuMemcpyPeerAsync(target, to.context(), source, from.context(), bytes, to.own_stream()),
             "cuMemcpyPeerAsync");
    if (landing)
      launch_walk(to, to.own_stream(), landing->layout, landing->buffer.get(), dst,
                  reinterpret_cast<CUdeviceptr>(dst.data));
  } catch (...) {
    try {
      free_packed_after_copy();
    } catch (const std::exception& e) {  // the device failed too: its memory goes with it
      log::debug("ordering the free of a packed peer source failed: {}", e.what());
    }
    throw;
  }
  free_packed_after_copy();
  if (copied) from.check(from.cu().cuStreamSynchronize(from.own_stream()), "cuStreamSynchronize");
  to.check(to.cu().cuStreamSynchronize(to.own_stream()), "cuStreamSynchronize");
}

}  // namespace abr::cuda
