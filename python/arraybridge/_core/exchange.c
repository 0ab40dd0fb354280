/*
 * The DLPack C exchange API (DLPack 1.3), both sides.
 *
 * Producer: arraybridge's Tensor type carries __dlpack_c_exchange_api__, so a
 * consumer in C (PyTorch, tvm-ffi) takes our tensors without calling __dlpack__
 * or making a capsule. Our tensors are complete when the call that made them
 * returns, so current_work_stream has nothing to order after and says NULL.
 *
 * Consumer: import_source takes a framework's tensor through its type's table
 * when it has one (exchange_import), and remembers the framework's current CUDA
 * stream, which the transfer then follows unless the caller named one.
 */
#include "core.h" /* Python.h first: it sets the POSIX level that clock_gettime needs */

#include <string.h>
#include <time.h>

static const char kCapsuleName[] = "dlpack_exchange_api";

/* ------------------------------------------------------------------ producer */

/* The pending Python exception's text, cleared (for SetError, which takes text). */
static void forward_exception(void* error_ctx, void (*set_error)(void*, const char*, const char*)) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyObject* text = value ? PyObject_Str(value) : NULL;
  const char* message = text ? PyUnicode_AsUTF8(text) : NULL;
  PyErr_Clear();
  const char* kind = type && PyErr_GivenExceptionMatches(type, PyExc_MemoryError) ? "MemoryError" : "RuntimeError";
  if (set_error) set_error(error_ctx, kind, message ? message : "arraybridge: allocation failed");
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
}

/* A new, compact tensor like the prototype, made the way every tensor of ours is
 * made: a planned copy, here of one zero element broadcast (stride 0) to the shape. */
static int exchange_allocate(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                             void (*set_error)(void* error_ctx, const char* kind, const char* message)) {
  static const uint64_t zeros[8];
  if (!prototype || !out || prototype->ndim < 0 || prototype->ndim > ABR_MAX_NDIM ||
      (prototype->ndim > 0 && !prototype->shape) || dtype_item_bytes(prototype->dtype) > (int64_t)sizeof zeros) {
    if (set_error)
      set_error(error_ctx, "ValueError",
                "arraybridge: managed_tensor_allocator needs a prototype with 0 to 32 dimensions, their shape, an "
                "element of at most 64 bytes, and an out pointer");
    return -1;
  }
  PyGILState_STATE gil = PyGILState_Ensure(); /* the runtime may be created, which raises on failure */
  abr_runtime* runtime = core_runtime();
  int result = -1;
  if (!runtime) {
    forward_exception(error_ctx, set_error);
  } else {
    int64_t strides[ABR_MAX_NDIM] = {0};
    DLManagedTensorVersioned zero = {
        {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
        NULL,
        NULL,
        DLPACK_FLAG_BITMASK_READ_ONLY,
        {(void*)zeros, {kDLCPU, 0}, prototype->ndim, prototype->dtype, prototype->shape, strides, 0}};
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    options.copy = ABR_COPY_ALWAYS;
    abr_status status;
    Py_BEGIN_ALLOW_THREADS
    status = abr_to_device(runtime, &zero, prototype->device, &options, NULL, out);
    Py_END_ALLOW_THREADS
    if (status == ABR_OK) {
      result = 0;
    } else if (set_error) {
      set_error(error_ctx, status == ABR_ERR_OUT_OF_MEMORY ? "MemoryError" : "ValueError", abr_last_error());
    }
  }
  PyGILState_Release(gil);
  return result;
}

static int not_ours(void* py_object) {
  PyErr_Format(PyExc_TypeError, "arraybridge: the DLPack exchange API of arraybridge.Tensor was given %s",
               py_object ? Py_TYPE((PyObject*)py_object)->tp_name : "NULL");
  return -1;
}

/* An owning view that keeps the Tensor alive, as __dlpack__'s capsule holds. */
static int exchange_from_py_object(void* py_object, DLManagedTensorVersioned** out) {
  if (!py_object || !tensor_check((PyObject*)py_object)) return not_ours(py_object);
  if (tensor_settle((PyObject*)py_object) < 0) return -1; /* queued work (non_blocking): waited for here */
  *out = new_owner_view(((TensorObject*)py_object)->tensor, (PyObject*)py_object, 0);
  return *out ? 0 : -1;
}

static int exchange_dltensor(void* py_object, DLTensor* out) {
  if (!py_object || !tensor_check((PyObject*)py_object)) return not_ours(py_object);
  if (tensor_settle((PyObject*)py_object) < 0) return -1;
  *out = ((TensorObject*)py_object)->tensor->dl_tensor;
  return 0;
}

static int exchange_current_stream(DLDeviceType device_type, int32_t device_id, void** out) {
  (void)device_type, (void)device_id;
  *out = NULL; /* a Tensor's queued work (non_blocking) is waited for when it is exported */
  return 0;
}

/* A Tensor owning `tensor` (taken only on success: on failure it stays the caller's).
 * Checked as every import is, by the library's zero-copy view of it on its own device:
 * a descriptor it refuses (a newer DLPack major, NULL data with elements, a negative
 * extent, an unknown dtype or device) was held as it was, and __dlpack__ handed it on:
 * NumPy read a NULL-data tensor of 12 floats as garbage (the consumers hunt). */
static int exchange_to_py_object(DLManagedTensorVersioned* tensor, void** out) {
  if (!tensor || !out) {
    PyErr_SetString(PyExc_ValueError, "arraybridge: managed_tensor_to_py_object_no_sync needs a tensor and out");
    return -1;
  }
  if (hooks_ready() < 0) return -1;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return -1;
  PyTypeObject* type = (PyTypeObject*)hooks.tensor_type;
  TensorObject* result = (TensorObject*)type->tp_alloc(type, 0);
  if (!result) return -1;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = ABR_COPY_NEVER;
  DLManagedTensorVersioned* view = NULL;
  abr_status status;
  Py_BEGIN_ALLOW_THREADS
  status = abr_to_device(runtime, tensor, tensor->dl_tensor.device, &options, NULL, &view);
  Py_END_ALLOW_THREADS
  if (status != ABR_OK) {
    Py_DECREF(result);
    raise_status(status, "managed_tensor_to_py_object_no_sync", NULL);
    return -1;
  }
  result->report.version = ABR_TRANSFER_REPORT_VERSION;
  result->report.path = ABR_PATH_ZERO_COPY;
  strcpy(result->report.detail, "handed over through the DLPack C exchange API");
  result->tensor = view;
  *out = result;
  return 0;
}

static DLPackExchangeAPI producer_api = {
    {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
    exchange_allocate,
    exchange_from_py_object,
    exchange_to_py_object,
    exchange_dltensor,
    exchange_current_stream,
};

int exchange_publish(PyTypeObject* type) {
  PyObject* capsule = PyCapsule_New(&producer_api, kCapsuleName, NULL);
  if (!capsule) return -1;
  const int status = PyDict_SetItem(type->tp_dict, names.exchange_api, capsule);
  Py_DECREF(capsule);
  if (status == 0) PyType_Modified(type);
  return status;
}

/* ------------------------------------------------------------------ consumer */

static void log_debug(PyObject* message) {
  if (!message) {
    PyErr_Clear();
    return;
  }
  PyObject* logging = PyImport_ImportModule("logging");
  PyObject* logger = logging ? PyObject_CallMethod(logging, "getLogger", "s", "arraybridge") : NULL;
  PyObject* done = logger ? PyObject_CallMethod(logger, "debug", "O", message) : NULL;
  if (!done) PyErr_Clear(); /* a log line never fails the transfer */
  Py_XDECREF(done);
  Py_XDECREF(logger);
  Py_XDECREF(logging);
  Py_DECREF(message);
}

/* The table a type publishes, if this build can use it: found along the MRO
 * without raising (most types have none, and an AttributeError costs more than a
 * transfer), then a major version this build speaks, walking prev_api back. */
static const DLPackExchangeAPI* find_api(PyTypeObject* type) {
  PyObject* mro = type->tp_mro;
  PyObject* found = NULL;
  for (Py_ssize_t i = 0; mro && !found && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* dict = ((PyTypeObject*)PyTuple_GET_ITEM(mro, i))->tp_dict;
    if (dict && !(found = PyDict_GetItemWithError(dict, names.exchange_api)) && PyErr_Occurred()) PyErr_Clear();
  }
  if (!found) return NULL;
  const DLPackExchangeAPIHeader* header = PyCapsule_IsValid(found, kCapsuleName)
      ? (const DLPackExchangeAPIHeader*)PyCapsule_GetPointer(found, kCapsuleName)
      : NULL;
  if (!header) {
    log_debug(PyUnicode_FromFormat("%s.__dlpack_c_exchange_api__ is not a \"%s\" capsule: using __dlpack__",
                                   type->tp_name, kCapsuleName));
    return NULL;
  }
  /* Bounded: a prev_api chain that leads back into itself would otherwise never end. */
  enum { kMaxChain = 16 };
  const DLPackExchangeAPIHeader* usable = header;
  for (int hops = 0; usable && usable->version.major != DLPACK_MAJOR_VERSION; ++hops)
    usable = hops < kMaxChain ? usable->prev_api : NULL;
  const DLPackExchangeAPI* api = (const DLPackExchangeAPI*)usable;
  if (!api || !api->managed_tensor_from_py_object_no_sync || !api->current_work_stream) {
    log_debug(
        PyUnicode_FromFormat("%s's DLPack exchange API is version %u.%u%s; this build speaks %d.x: using "
                             "__dlpack__",
                             type->tp_name, header->version.major, header->version.minor,
                             api ? " without the functions a consumer needs" : "", DLPACK_MAJOR_VERSION));
    return NULL;
  }
  return api;
}

/* The last few types seen and their tables (NULL: none), as the specification
 * allows: a type's table is fixed. The types are held so an address is never reused. */
enum { kCachedTypes = 8 };
static struct {
  PyTypeObject* type;
  const DLPackExchangeAPI* api;
} cache[kCachedTypes];
static int next_slot;

const DLPackExchangeAPI* exchange_api_of(PyTypeObject* type) {
  for (int i = 0; i < kCachedTypes; ++i)
    if (cache[i].type == type) return cache[i].api;
  const DLPackExchangeAPI* api = find_api(type);
  Py_INCREF(type);
  Py_XSETREF(cache[next_slot].type, type);
  cache[next_slot].api = api;
  next_slot = (next_slot + 1) % kCachedTypes;
  return api;
}

int exchange_import(PyObject* x, Imported* out) {
  const DLPackExchangeAPI* api = exchange_api_of(Py_TYPE(x));
  if (!api) return 0;
  DLManagedTensorVersioned* tensor = NULL;
  if (api->managed_tensor_from_py_object_no_sync(x, &tensor) != 0 || !tensor) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_BufferError, "arraybridge: %s's DLPack exchange API exported no tensor", Py_TYPE(x)->tp_name);
    return -1;
  }
  out->tensor = tensor;
  out->versioned = 1;
  out->any_thread = 0; /* a producer's deleter: it may need the GIL */
  out->work_stream = 0;
  const DLDevice device = tensor->dl_tensor.device;
  if (has_dlpack_streams(device)) {
    void* stream = NULL;
    if (api->current_work_stream(device.device_type, device.device_id, &stream) != 0) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_BufferError, "arraybridge: %s's DLPack exchange API failed to say its current stream",
                     Py_TYPE(x)->tp_name); /* a failed export, as __dlpack__'s would be */
      imported_delete(out);
      return -1;
    }
    /* NULL is the default stream, which DLPack names by a value (CUDA's legacy stream: 1) */
    out->work_stream = stream ? (uintptr_t)stream : kind_default_stream(device.device_type);
  }
  return 1;
}

/* hand_over(tensor, cls) -> cls's own tensor on the same memory, made by cls's
 * exchange API (managed_tensor_to_py_object_no_sync), or None when cls has none. */
PyObject* core_hand_over(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 2 || !tensor_check(args[0]) || !PyType_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "hand_over(tensor, cls): an arraybridge Tensor and a type");
    return NULL;
  }
  const DLPackExchangeAPI* api = exchange_api_of((PyTypeObject*)args[1]);
  if (!api || !api->managed_tensor_to_py_object_no_sync) Py_RETURN_NONE;
  DLManagedTensorVersioned* view = new_owner_view(((TensorObject*)args[0])->tensor, args[0], 0);
  if (!view) return NULL;
  void* result = NULL;
  if (api->managed_tensor_to_py_object_no_sync(view, &result) != 0 || !result) {
    /* Whether the producer took the view on failure is not specified: it is left
     * (a small leak at worst), never deleted twice. */
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_BufferError, "arraybridge: %s's DLPack exchange API made no tensor",
                   ((PyTypeObject*)args[1])->tp_name);
    return NULL;
  }
  return (PyObject*)result;
}

/* handover_ns(tensor, n) -> (ns per managed_tensor_from_py_object_no_sync plus the
 * deleter, ns per dltensor_from_py_object_no_sync): our side of a hand-over timed
 * in a C loop through our own table, as a C consumer calls it (for the benchmark). */
PyObject* core_handover_ns(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  long long n = nargs == 2 ? PyLong_AsLongLong(args[1]) : -1;
  if (nargs != 2 || !tensor_check(args[0]) || n <= 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "handover_ns(tensor, n): a Tensor and a count > 0");
    return NULL;
  }
  struct timespec start, middle, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long long i = 0; i < n; ++i) {
    DLManagedTensorVersioned* view;
    if (producer_api.managed_tensor_from_py_object_no_sync(args[0], &view) != 0) return NULL;
    view->deleter(view);
  }
  clock_gettime(CLOCK_MONOTONIC, &middle);
  DLTensor borrowed;
  for (long long i = 0; i < n; ++i) {
    if (producer_api.dltensor_from_py_object_no_sync(args[0], &borrowed) != 0) return NULL;
    __asm__ volatile("" : : "g"(&borrowed) : "memory"); /* keep the loop */
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  const double owned = ((middle.tv_sec - start.tv_sec) * 1e9 + (middle.tv_nsec - start.tv_nsec)) / (double)n;
  const double view = ((end.tv_sec - middle.tv_sec) * 1e9 + (end.tv_nsec - middle.tv_nsec)) / (double)n;
  return Py_BuildValue("(dd)", owned, view);
}
