/*
 * exchange_peer: a small framework of the tests' own that speaks the DLPack C
 * exchange API both ways, counting every call and every deleter it runs, so the
 * tests can see which path a hand-over took and that nothing leaked.
 *
 * Peer(x) holds what x.__dlpack__() exports and publishes the five functions on
 * its type; consume(obj) calls every function of obj's type's table. Built by tests/python/exchange.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "arraybridge/dlpack.h"

static struct {
  long from_calls, to_calls, view_calls, stream_calls, alloc_calls, deleted;
  int last_stream_type, last_stream_id;
} counts;
static uintptr_t work_stream; /* what current_work_stream answers for non-CPU devices */

typedef struct {
  PyObject_HEAD DLManagedTensorVersioned* tensor; /* owned */
} PeerObject;

static PyTypeObject PeerType;

/* A view handed to a consumer: keeps the Peer alive; its deleter needs the GIL. */
typedef struct {
  DLManagedTensorVersioned tensor;
  PyObject* owner;
} PeerView;

static void view_deleter(DLManagedTensorVersioned* self) {
  PyGILState_STATE gil = PyGILState_Ensure();
  ++counts.deleted;
  Py_DECREF(((PeerView*)self)->owner);
  free(self);
  PyGILState_Release(gil);
}

static int from_py_object(void* object, DLManagedTensorVersioned** out) {
  ++counts.from_calls;
  PeerView* view = malloc(sizeof *view);
  if (!view) return PyErr_NoMemory(), -1;
  view->tensor = *((PeerObject*)object)->tensor;
  view->tensor.manager_ctx = view;
  view->tensor.deleter = view_deleter;
  view->owner = object;
  Py_INCREF(view->owner);
  *out = &view->tensor;
  return 0;
}

static int dltensor_from_py_object(void* object, DLTensor* out) {
  ++counts.view_calls;
  *out = ((PeerObject*)object)->tensor->dl_tensor;
  return 0;
}

static int current_work_stream(DLDeviceType type, int32_t id, void** out) {
  ++counts.stream_calls;
  counts.last_stream_type = (int)type;
  counts.last_stream_id = (int)id;
  *out = type == kDLCPU ? NULL : (void*)work_stream;
  return 0;
}

static int to_py_object(DLManagedTensorVersioned* tensor, void** out) {
  ++counts.to_calls;
  PeerObject* peer = PyObject_New(PeerObject, &PeerType);
  if (!peer) return -1;
  peer->tensor = tensor;
  *out = peer;
  return 0;
}

/* Host memory only, zeroed, for the prototype's shape. */
typedef struct {
  DLManagedTensorVersioned tensor;
  int64_t shape[8];
} Allocated;

static void allocated_deleter(DLManagedTensorVersioned* self) {
  ++counts.deleted;
  free(self->dl_tensor.data);
  free(self);
}

static int allocate(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                    void (*set_error)(void*, const char*, const char*)) {
  ++counts.alloc_calls;
  if (prototype->device.device_type != kDLCPU || prototype->ndim > 8) {
    set_error(error_ctx, "ValueError", "exchange_peer allocates on the CPU only, up to 8 dimensions");
    return -1;
  }
  Allocated* made = calloc(1, sizeof *made);
  size_t count = 1;
  for (int i = 0; i < prototype->ndim; ++i) count *= (size_t)(made->shape[i] = prototype->shape[i]);
  made->tensor.version.major = DLPACK_MAJOR_VERSION;
  made->tensor.version.minor = DLPACK_MINOR_VERSION;
  made->tensor.deleter = allocated_deleter;
  made->tensor.dl_tensor = *prototype;
  made->tensor.dl_tensor.shape = made->shape;
  made->tensor.dl_tensor.strides = NULL;
  made->tensor.dl_tensor.byte_offset = 0;
  made->tensor.dl_tensor.data = calloc(count ? count : 1, (prototype->dtype.bits * prototype->dtype.lanes + 7) / 8);
  *out = &made->tensor;
  return 0;
}

static DLPackExchangeAPI peer_api = {{{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
                                     allocate,
                                     from_py_object,
                                     to_py_object,
                                     dltensor_from_py_object,
                                     current_work_stream};

/* Peer(x): holds the versioned tensor x.__dlpack__(max_version=(1, 3)) exports. */
static PyObject* peer_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* source;
  if (!PyArg_ParseTuple(args, "O", &source)) return NULL;
  (void)kwargs;
  PyObject* method = PyObject_GetAttrString(source, "__dlpack__");
  PyObject* empty = PyTuple_New(0);
  PyObject* keywords = Py_BuildValue("{s:(ii)}", "max_version", 1, 3);
  PyObject* versioned = method && empty && keywords ? PyObject_Call(method, empty, keywords) : NULL;
  Py_XDECREF(method);
  Py_XDECREF(empty);
  Py_XDECREF(keywords);
  if (!versioned) return NULL;
  DLManagedTensorVersioned* tensor = PyCapsule_GetPointer(versioned, "dltensor_versioned");
  if (!tensor || PyCapsule_SetName(versioned, "used_dltensor_versioned") < 0) {
    Py_DECREF(versioned);
    return NULL;
  }
  Py_DECREF(versioned);
  PeerObject* self = (PeerObject*)type->tp_alloc(type, 0);
  if (!self) return tensor->deleter(tensor), NULL;
  self->tensor = tensor;
  return (PyObject*)self;
}

static void peer_dealloc(PeerObject* self) {
  if (self->tensor && self->tensor->deleter) self->tensor->deleter(self->tensor);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* For NumPy to read a Peer back: a legacy-free versioned capsule of a view. */
static void capsule_destructor(PyObject* capsule) {
  DLManagedTensorVersioned* t = PyCapsule_GetPointer(capsule, "dltensor_versioned");
  if (t)
    t->deleter(t);
  else
    PyErr_Clear();
}

static PyObject* peer_dlpack(PyObject* self, PyObject* args, PyObject* kwargs) {
  (void)args, (void)kwargs;
  DLManagedTensorVersioned* view;
  if (from_py_object(self, &view) < 0) return NULL;
  --counts.from_calls; /* counted as __dlpack__, not as the exchange API */
  return PyCapsule_New(view, "dltensor_versioned", capsule_destructor);
}

static PyObject* peer_dlpack_device(PyObject* self, PyObject* unused) {
  (void)unused;
  DLDevice d = ((PeerObject*)self)->tensor->dl_tensor.device;
  return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

static PyObject* peer_data_ptr(PyObject* self, void* unused) {
  (void)unused;
  return PyLong_FromVoidPtr(((PeerObject*)self)->tensor->dl_tensor.data);
}

static PyMethodDef peer_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))peer_dlpack, METH_VARARGS | METH_KEYWORDS, NULL},
    {"__dlpack_device__", peer_dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef peer_getset[] = {{"data_ptr", peer_data_ptr, NULL, NULL, NULL}, {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject PeerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "exchange_peer.Peer",
    .tp_basicsize = sizeof(PeerObject),
    .tp_dealloc = (destructor)peer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, /* tests subclass it to publish other tables */
    .tp_methods = peer_methods,
    .tp_getset = peer_getset,
    .tp_new = peer_new,
};

static const DLPackExchangeAPI* api_of(PyObject* object) {
  PyObject* capsule = PyObject_GetAttrString((PyObject*)Py_TYPE(object), "__dlpack_c_exchange_api__");
  if (!capsule) return NULL;
  const DLPackExchangeAPI* api = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  Py_DECREF(capsule);
  return api;
}

static void record_error(void* error_ctx, const char* kind, const char* message) {
  PyObject** slot = error_ctx;
  *slot = PyUnicode_FromFormat("%s: %s", kind, message);
}

/* consume(obj, device=(1, 0)) -> dict: every function of obj's type's table called
 * once, as a C consumer would, with what each returned. */
static PyObject* consume(PyObject* module, PyObject* args) {
  (void)module;
  PyObject* object;
  int device_type = kDLCPU, device_id = 0;
  if (!PyArg_ParseTuple(args, "O|(ii)", &object, &device_type, &device_id)) return NULL;
  const DLPackExchangeAPI* api = api_of(object);
  if (!api) return NULL;
  DLManagedTensorVersioned* owned = NULL;
  if (api->managed_tensor_from_py_object_no_sync(object, &owned) != 0) return NULL;
  DLTensor view;
  if (api->dltensor_from_py_object_no_sync(object, &view) != 0) return owned->deleter(owned), NULL;
  void* stream = (void*)1;
  if (api->current_work_stream((DLDeviceType)device_type, device_id, &stream) != 0) return owned->deleter(owned), NULL;
  DLTensor prototype = owned->dl_tensor;
  prototype.device.device_type = (DLDeviceType)device_type;
  prototype.device.device_id = device_id;
  DLManagedTensorVersioned* made = NULL;
  PyObject* error = NULL;
  const int allocated = api->managed_tensor_allocator(&prototype, &made, &error, record_error);
  PyObject* made_object = NULL;
  if (allocated == 0 && api->managed_tensor_to_py_object_no_sync(made, (void**)&made_object) != 0) {
    made->deleter(made);
    owned->deleter(owned);
    return NULL;
  }
  PyObject* result = Py_BuildValue(
      "{s:i,s:i,s:K,s:K,s:L,s:K,s:K,s:N,s:N,s:i,s:i}", "major", (int)api->header.version.major, "minor",
      (int)api->header.version.minor, "data", (unsigned long long)(uintptr_t)owned->dl_tensor.data, "view_data",
      (unsigned long long)(uintptr_t)view.data, "numel", (long long)(view.ndim ? view.shape[0] : 1), "stream",
      (unsigned long long)(uintptr_t)stream, "flags", (unsigned long long)owned->flags, "made",
      made_object ? made_object : Py_NewRef(Py_None), "error", error ? error : Py_NewRef(Py_None), "has_deleter",
      owned->deleter != NULL, "same_ndim", view.ndim == owned->dl_tensor.ndim);
  owned->deleter(owned);
  return result;
}

static PyObject* get_counts(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return Py_BuildValue("{s:l,s:l,s:l,s:l,s:l,s:l,s:(ii)}", "from", counts.from_calls, "to", counts.to_calls, "view",
                       counts.view_calls, "stream", counts.stream_calls, "alloc", counts.alloc_calls, "deleted",
                       counts.deleted, "last_stream_device", counts.last_stream_type, counts.last_stream_id);
}

static PyObject* set_work_stream(PyObject* module, PyObject* value) {
  (void)module;
  work_stream = (uintptr_t)PyLong_AsUnsignedLongLong(value);
  if (PyErr_Occurred()) return NULL;
  Py_RETURN_NONE;
}

/* api_capsule(major, chained) -> a table of DLPack `major`.0 with no functions,
 * whose prev_api is Peer's own table when chained (a future producer's shape). */
static PyObject* api_capsule(PyObject* module, PyObject* args) {
  (void)module;
  unsigned major;
  int chained;
  if (!PyArg_ParseTuple(args, "Ip", &major, &chained)) return NULL;
  DLPackExchangeAPIHeader* header = calloc(1, sizeof(DLPackExchangeAPI)); /* lives as long as the process */
  if (!header) return PyErr_NoMemory();
  header->version.major = major;
  header->prev_api = chained ? &peer_api.header : NULL;
  return PyCapsule_New(header, "dlpack_exchange_api", NULL);
}

static PyMethodDef methods[] = {
    {"consume", consume, METH_VARARGS, NULL},
    {"api_capsule", api_capsule, METH_VARARGS, NULL},
    {"counts", get_counts, METH_NOARGS, NULL},
    {"set_work_stream", set_work_stream, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "exchange_peer", NULL, -1, methods};

PyMODINIT_FUNC PyInit_exchange_peer(void) {
  if (PyType_Ready(&PeerType) < 0) return NULL;
  PyObject* capsule = PyCapsule_New(&peer_api, "dlpack_exchange_api", NULL);
  if (!capsule || PyDict_SetItemString(PeerType.tp_dict, "__dlpack_c_exchange_api__", capsule) < 0) return NULL;
  Py_DECREF(capsule);
  PyType_Modified(&PeerType);
  PyObject* module = PyModule_Create(&module_def);
  if (!module) return NULL;
  Py_INCREF(&PeerType);
  PyModule_AddObject(module, "Peer", (PyObject*)&PeerType);
  return module;
}
