// CUDA IPC entry points: abr_ipc_handle_init, abr_ipc_export, abr_ipc_import.
#include "capi/handles.hpp"
#include "capi/struct_versions.hpp"

using abr::capi::guarded;
using abr::capi::kIpcHandle;
using abr::capi::require_pointer;
using abr::capi::runtime_of;
using abr::capi::stream_of;

extern "C" {

abr_status abr_ipc_handle_init(abr_ipc_handle* handle, unsigned int version) {
  return guarded(__func__, [&] { abr::capi::init_versioned(handle, version, kIpcHandle); });
}

abr_status abr_ipc_export(abr_runtime* runtime, const DLTensor* tensor, abr_stream* stream, abr_ipc_handle* handle) {
  return guarded(__func__, [&] {
    require_pointer(handle, "handle");
    abr::capi::caller_size(handle->version, kIpcHandle);  // refused before anything is asked of the driver
    abr::Runtime& rt = runtime_of(runtime);
    abr_ipc_handle made = ABR_IPC_HANDLE_INIT;
    made.size = rt.ipc_export(*require_pointer(tensor, "tensor"), stream_of(stream), made.data, sizeof made.data);
    abr::capi::write_versioned(handle, made, kIpcHandle);
  });
}

abr_status abr_ipc_import(abr_runtime* runtime, const abr_ipc_handle* handle, abr_stream* stream,
                          DLManagedTensorVersioned** out) {
  return guarded(__func__, [&] {
    *require_pointer(out, "out") = nullptr;
    const abr_ipc_handle given = abr::capi::read_versioned(require_pointer(handle, "handle"), kIpcHandle);
    if (given.size > sizeof given.data)
      abr::fail(ABR_ERR_INVALID_ARGUMENT, "abr_ipc_handle.size = {} exceeds the {} bytes of data", given.size,
                sizeof given.data);
    *out = runtime_of(runtime).ipc_import(given.data, given.size, stream_of(stream));
  });
}

}  // extern "C"
