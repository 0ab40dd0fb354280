// Sharing device memory between processes (abr_ipc_export / abr_ipc_import): the
// runtime checks the tensor and hands it to the backend of its memory, whose
// driver makes the handle (CUDA IPC: cuda/ipc.cpp). Host memory and backends
// without interprocess handles (OpenCL) are refused, saying what to use instead.
#include "lib/error.hpp"
#include "lib/runtime.hpp"

namespace abr {

uint32_t DeviceBackend::ipc_export(const Layout& tensor, Stream*, unsigned char*, std::size_t) {
  fail(ABR_ERR_UNSUPPORTED,
       "{} memory cannot be shared with another process: {} has no interprocess memory handles (CUDA IPC is the "
       "only kind; copy the tensor to a CUDA device, or to the host and share that with shared memory or MPI)",
       device_string(tensor.device), backend_name(report().info.backend));
}

DLManagedTensorVersioned* DeviceBackend::ipc_import(const unsigned char*, std::size_t, Stream*) {
  fail(ABR_ERR_UNSUPPORTED, "{} has no interprocess memory handles", backend_name(report().info.backend));
}

uint32_t Runtime::ipc_export(const DLTensor& tensor, Stream* stream, unsigned char* out, std::size_t capacity) {
  const Layout layout = validate_tensor(tensor, Role::Source, "tensor");
  if (is_host_accessible(layout.device.device_type))
    fail(ABR_ERR_UNSUPPORTED,
         "{} is host memory: CUDA IPC shares device memory only (share host memory between processes with shared "
         "memory or MPI, or copy it to a CUDA device first)", device_string(layout.device));
  devices_.require(layout.device, "tensor");
  check_stream(stream, layout.device, layout.device);
  return backend_of(layout.device.device_type)->ipc_export(layout, stream, out, capacity);
}

DLManagedTensorVersioned* Runtime::ipc_import(const unsigned char* handle, std::size_t size, Stream* stream) {
  DeviceBackend* cuda = backend_of(kDLCUDA);  // the only backend with interprocess handles
  const BackendInfo& info = devices_.backend(ABR_BACKEND_CUDA);
  if (!cuda || !info.available || info.device_count == 0)
    fail(ABR_ERR_NO_DEVICE, "importing a CUDA IPC handle needs a CUDA device here: {}", info.detail);
  if (stream && stream->device().device_type != kDLCUDA)
    fail(ABR_ERR_INVALID_ARGUMENT, "the stream belongs to {}: an imported CUDA tensor is ordered on a CUDA stream",
         device_string(stream->device()));
  return cuda->ipc_import(handle, size, stream);
}

}  // namespace abr
