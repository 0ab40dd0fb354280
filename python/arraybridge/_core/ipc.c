/*
 * CUDA IPC from Python: a handle's bytes for any CUDA DLPack tensor (ours, or a
 * framework's taken like a transfer source), and the Tensor a handle names in
 * another process. The package wraps the bytes in a picklable IpcHandle (_ipc.py).
 */
#include "core.h"

PyObject* core_ipc_export(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (hooks_ready() < 0) return NULL;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "ipc_export(x, stream)");
    return NULL;
  }
  uintptr_t stream = 0;
  if (parse_stream(args[1], &stream) < 0) return NULL;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  Imported source = {0};
  if (import_source(args[0], "x", IMPORT_SHARED, &source) < 0) return NULL;
  if (source.versioned && ((const DLManagedTensorVersioned*)source.tensor)->flags & DLPACK_FLAG_BITMASK_READ_ONLY) {
    /* the importer opens the memory writable: DLTensor, which the C API takes, has no flags */
    imported_delete(&source);
    PyErr_SetString(PyExc_BufferError,
                    "arraybridge: x is read-only (its owner treats it as immutable), and an IPC "
                    "handle opens its memory writable in the other process; share a copy "
                    "(arraybridge.to_device(x, device, copy=True))");
    return NULL;
  }
  if (!stream) stream = source.work_stream; /* the producer's current stream, from its exchange API */
  const DLTensor* tensor = imported_tensor(&source);
  const DLDevice device = tensor->device;
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  abr_status status = ABR_OK;
  Py_BEGIN_ALLOW_THREADS
  abr_stream* wrapped = NULL;
  if (stream && has_dlpack_streams(device)) status = abr_stream_wrap(runtime, device, (void*)stream, &wrapped);
  if (status == ABR_OK) status = abr_ipc_export(runtime, tensor, wrapped, &handle);
  abr_stream_destroy(wrapped);
  Py_END_ALLOW_THREADS
  imported_delete(&source); /* the handle names the memory, not this reference: the exporter keeps x alive */
  core_drain();
  if (status != ABR_OK) {
    raise_status(status, "ipc_handle", NULL);
    return NULL;
  }
  return PyBytes_FromStringAndSize((const char*)handle.data, (Py_ssize_t)handle.size);
}

PyObject* core_ipc_import(PyObject* module, PyObject* data) {
  (void)module;
  if (hooks_ready() < 0) return NULL;
  char* bytes = NULL;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(data, &bytes, &size) < 0) return NULL;
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  if (size > (Py_ssize_t)sizeof handle.data) {
    PyErr_Format(PyExc_ValueError, "arraybridge: %zd bytes are no IPC handle (at most %zu)", size, sizeof handle.data);
    return NULL;
  }
  memcpy(handle.data, bytes, (size_t)size);
  handle.size = (uint32_t)size;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  PyTypeObject* type = (PyTypeObject*)hooks.tensor_type;
  TensorObject* result = (TensorObject*)type->tp_alloc(type, 0);
  if (!result) return NULL;
  DLManagedTensorVersioned* out = NULL;
  abr_status status;
  Py_BEGIN_ALLOW_THREADS
  status = abr_ipc_import(runtime, &handle, NULL, &out); /* waits for the exporter's queued work */
  Py_END_ALLOW_THREADS
  if (status != ABR_OK) {
    Py_DECREF(result);
    raise_status(status, "from_ipc", NULL);
    return NULL;
  }
  result->tensor = out;
  result->report.version = ABR_TRANSFER_REPORT_VERSION;
  result->report.path = ABR_PATH_ZERO_COPY;
  static const char detail[] = "opened from a CUDA IPC handle: another process's memory, in place";
  memcpy(result->report.detail, detail, sizeof detail);
  return (PyObject*)result;
}
