// DeviceBackend's defaults: what a backend without peer copies or interprocess handles says.
#include "lib/devices/backend.hpp"

#include "lib/tensor/device_kinds.hpp"
#include "lib/base/error.hpp"
#include "lib/tensor/layout.hpp"

namespace abr {

void DeviceBackend::peer_copy(const Layout& src, const Layout& dst, Stream*, PeerSteps) {
  fail(ABR_ERR_INTERNAL, "{} has no peer copies, but a plan asked for one ({} -> {})",
       backend_name(report().info.backend), device_string(src.device), device_string(dst.device));
}

uint32_t DeviceBackend::ipc_export(const Layout& tensor, Stream*, unsigned char*, std::size_t) {
  fail(ABR_ERR_UNSUPPORTED,
       "{} memory cannot be shared with another process: {} has no interprocess memory handles (copy the "
       "tensor to a device whose backend has them, or to the host and share that with shared memory or MPI)",
       device_string(tensor.device), backend_name(report().info.backend));
}

DLManagedTensorVersioned* DeviceBackend::ipc_import(const unsigned char*, std::size_t, Stream*) {
  fail(ABR_ERR_UNSUPPORTED, "{} has no interprocess memory handles", backend_name(report().info.backend));
}

}  // namespace abr
