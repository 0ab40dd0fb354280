// Sharing device memory between processes (abr_ipc_export / abr_ipc_import): the
// runtime checks the tensor and hands it to the backend of its memory, whose
// driver makes the handle (CUDA IPC: cuda/ipc.cpp); an import goes to the backend
// whose descriptor says it has handles. Host memory and backends without
// interprocess handles (OpenCL) are refused, saying what to use instead.
#include "lib/base/error.hpp"
#include "lib/run/runtime.hpp"

namespace abr {

uint32_t Runtime::ipc_export(const DLTensor& tensor, Stream* stream, unsigned char* out, std::size_t capacity) {
  const Layout layout = validate_tensor(tensor, Role::Source, "tensor");
  if (is_host_accessible(layout.device.device_type))
    fail(ABR_ERR_UNSUPPORTED,
         "{} is host memory: interprocess handles share device memory only (share host memory between processes "
         "with shared memory or MPI, or copy it to a device first)",
         device_string(layout.device));
  devices_.require(layout.device, "tensor");
  check_stream(stream, layout.device, layout.device);
  return backend_of(layout.device.device_type)->ipc_export(layout, stream, out, capacity);
}

DLManagedTensorVersioned* Runtime::ipc_import(const unsigned char* handle, std::size_t size, Stream* stream) {
  // The handle goes to the backend with interprocess handles (CUDA is the only one built in).
  const BackendDescriptor* with_ipc = nullptr;
  for (const BackendDescriptor* descriptor : descriptors_)
    if (descriptor->ipc && !with_ipc) with_ipc = descriptor;
  if (!with_ipc) fail(ABR_ERR_UNSUPPORTED, "no backend of this runtime has interprocess memory handles");
  if (forked()) refuse_forked(fmt::format("{} memory", with_ipc->name));
  const BackendInfo& info = devices_.backend(with_ipc->id);
  DeviceBackend* backend = nullptr;
  for (const auto& opened : backends_)
    if (opened->report().info.backend == with_ipc->id) backend = opened.get();
  if (!backend || !info.available || info.device_count == 0)
    fail(ABR_ERR_NO_DEVICE, "importing a {} IPC handle needs a {} device here: {}", with_ipc->name, with_ipc->name,
         info.detail);
  if (stream && backend_of(stream->device().device_type) != backend)
    fail(ABR_ERR_INVALID_ARGUMENT, "the stream belongs to {}: an imported {} tensor is ordered on a {} stream",
         device_string(stream->device()), with_ipc->name, with_ipc->name);
  return backend->ipc_import(handle, size, stream);
}

}  // namespace abr
