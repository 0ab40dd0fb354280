/*
 * TensorBase: the C half of arraybridge.Tensor. It owns the managed tensor the
 * runtime returned and the report of the transfer that made it, and answers
 * __dlpack__ for the common request (this device, no stream, no copy) without
 * entering Python; the Python subclass adds the descriptive properties and
 * _dlpack_slow() for everything else (streams, other devices, copies).
 */
#include <stddef.h>
#include <string.h>

#include "core.h"

int tensor_check(PyObject* object) { return PyObject_TypeCheck(object, &TensorBaseType); }

static PyObject* tensor_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  (void)type, (void)args, (void)kwargs;
  PyErr_SetString(PyExc_TypeError,
                  "arraybridge.Tensor is made by arraybridge.to_device() or arraybridge.from_dlpack()");
  return NULL;
}

static void tensor_dealloc(TensorObject* self) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback); /* a deleter may run Python code: keep any error in flight */
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject*)self);
  if (self->ready) {                            /* queued work may still write the memory the deleter frees */
    const int seen = event_failed(self->ready); /* a failure the caller was told of is not told again */
    if (event_settle(self->ready) < 0)
      seen || event_quiet(self->ready) ? PyErr_Clear() : PyErr_WriteUnraisable((PyObject*)self);
    Py_CLEAR(self->ready);
  }
  DLManagedTensorVersioned* tensor = self->tensor;
  self->tensor = NULL;
  if (tensor && tensor->deleter) tensor->deleter(tensor);
  Py_CLEAR(self->torch_twin);
  Py_CLEAR(self->base);
  core_drain();
  PyErr_Restore(type, value, traceback);
  PyTypeObject* tensor_type = Py_TYPE(self);
  tensor_type->tp_free((PyObject*)self);
  if (tensor_type->tp_flags & Py_TPFLAGS_HEAPTYPE) Py_DECREF(tensor_type); /* an instance of a heap type owns one */
}

int tensor_settle(PyObject* tensor) {
  PyObject* ready = tensor_tracked(tensor)->ready;
  return ready ? event_settle(ready) : 0; /* kept: an import may still borrow its handle */
}

void tensor_maybe_view_of(PyObject* result, PyObject* source, abr_path path) {
  if ((path != ABR_PATH_ZERO_COPY && path != ABR_PATH_HOST_WRAP) || !source) return;
  TensorObject* base = tensor_tracked(source);
  TensorObject* self = (TensorObject*)result;
  Py_INCREF(base);
  self->base = (PyObject*)base;
  /* The call's Event is the base's already (tensors_hold: ordered after the base's, it
   * stands for both), or the base keeps a failure every reader raises. */
  if (self->ready && !base->ready) {
    base->ready = self->ready;
    self->ready = NULL;
  }
  Py_CLEAR(self->ready);
}

/* 1 when `requested` is a (type, id) pair naming this tensor's device, 0 when it
 * is anything else (the slow path then explains what is wrong with it). */
static int is_own_device(const TensorObject* self, PyObject* requested) {
  if (!PyTuple_Check(requested) || PyTuple_GET_SIZE(requested) != 2) return 0;
  long type = PyLong_AsLong(PyTuple_GET_ITEM(requested, 0));
  long id = PyLong_AsLong(PyTuple_GET_ITEM(requested, 1));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  const DLDevice own = self->tensor->dl_tensor.device;
  return type == (long)own.device_type && id == (long)own.device_id;
}

/* max_version's major number (0 when absent), or -1 when it is no (major, minor)
 * tuple of ints: _dlpack_slow says what is wrong with it. */
static long major_version(PyObject* max_version) {
  if (!max_version || max_version == Py_None) return 0;
  if (!PyTuple_CheckExact(max_version) || PyTuple_GET_SIZE(max_version) != 2 ||
      !PyLong_Check(PyTuple_GET_ITEM(max_version, 0)) || !PyLong_Check(PyTuple_GET_ITEM(max_version, 1)))
    return -1;
  long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
  if (major == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  return major < 0 ? -1 : major;
}

static PyObject* tensor_dlpack(TensorObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const kNames[] = {"stream", "max_version", "dl_device", "copy"};
  static PyObject* interned[4];
  PyObject* a[4];
  if (parse_arguments("__dlpack__", args, nargs, kwnames, kNames, interned, 4, 0, 0, a) < 0) return NULL;
  PyObject *stream = a[0], *max_version = a[1], *dl_device = a[2], *copy = a[3];
  const long major = major_version(max_version);
  const int versioned = major >= 1;
  const int read_only = (self->tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  if ((!stream || stream == Py_None) && (!copy || copy == Py_None || copy == Py_False) &&
      (!dl_device || dl_device == Py_None || is_own_device(self, dl_device)) && major >= 0 && (versioned || !read_only))
    /* No stream to order on: a consumer reads the data once this returns. */
    return tensor_settle((PyObject*)self) < 0 ? NULL : export_capsule(self->tensor, (PyObject*)self, versioned, 0);
  PyObject* call[6] = {NULL,
                       (PyObject*)self,
                       stream ? stream : Py_None,
                       max_version ? max_version : Py_None,
                       dl_device ? dl_device : Py_None,
                       copy ? copy : Py_None}; /* call[0]: vectorcall's spare slot */
  return PyObject_VectorcallMethod(names.dlpack_slow, call + 1, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject* int_tuple(const int64_t* values, int32_t count) {
  PyObject* tuple = PyTuple_New(count);
  for (int32_t i = 0; tuple && i < count; ++i) {
    PyObject* value = PyLong_FromLongLong(values[i]);
    if (!value)
      Py_CLEAR(tuple);
    else
      PyTuple_SET_ITEM(tuple, i, value);
  }
  return tuple;
}

static PyObject* tensor_shape(TensorObject* self, void* unused) {
  (void)unused;
  return int_tuple(self->tensor->dl_tensor.shape, self->tensor->dl_tensor.ndim);
}

/* Strides in elements, as DLPack counts them; compact row-major ones when NULL. */
static PyObject* tensor_strides(TensorObject* self, void* unused) {
  (void)unused;
  const DLTensor* t = &self->tensor->dl_tensor;
  if (t->strides) return int_tuple(t->strides, t->ndim);
  int64_t strides[ABR_MAX_NDIM];
  int64_t step = 1;
  for (int32_t i = t->ndim; i-- > 0;) {
    strides[i] = step;
    step *= t->shape[i];
  }
  return int_tuple(strides, t->ndim);
}

static PyObject* tensor_ndim(TensorObject* self, void* unused) {
  (void)unused;
  return PyLong_FromLong(self->tensor->dl_tensor.ndim);
}

/* A name from the library's vocabulary (abr_dtype_format, abr_device_format). */
static PyObject* name_or_error(abr_status status, const char* name, const char* what) {
  if (status == ABR_OK) return PyUnicode_FromString(name);
  raise_status(status, what, NULL);
  return NULL;
}

/* The names of the last dtypes asked for, made once: a name made afresh was a third
 * of a small conversion's check of it (convert_memory asks torch's dtypes so). */
#define NAMED_DTYPES 16
static struct {
  DLDataType dtype;
  PyObject* name; /* NULL: an empty slot */
} named_dtypes[NAMED_DTYPES];
static unsigned named_next; /* wraps harmlessly */

static PyObject* tensor_dtype(TensorObject* self, void* unused) {
  (void)unused;
  const DLDataType dtype = self->tensor->dl_tensor.dtype;
  for (int i = 0; i < NAMED_DTYPES; ++i)
    if (named_dtypes[i].name && named_dtypes[i].dtype.code == dtype.code && named_dtypes[i].dtype.bits == dtype.bits &&
        named_dtypes[i].dtype.lanes == dtype.lanes) {
      Py_INCREF(named_dtypes[i].name);
      return named_dtypes[i].name;
    }
  char text[ABR_NAME_MAX];
  PyObject* name = name_or_error(abr_dtype_format(dtype, text, sizeof text), text, "naming the dtype");
  if (!name) return NULL;
  const unsigned slot = named_next++ % NAMED_DTYPES;
  PyObject* evicted = named_dtypes[slot].name;
  named_dtypes[slot].dtype = dtype;
  Py_INCREF(name);
  named_dtypes[slot].name = name;
  Py_XDECREF(evicted); /* a str: its dealloc runs no code that reads the table */
  return name;
}

static PyObject* tensor_device_name(TensorObject* self, void* unused) {
  (void)unused;
  char name[ABR_NAME_MAX];
  return name_or_error(abr_device_format(self->tensor->dl_tensor.device, name, sizeof name), name, "naming the device");
}

static PyObject* tensor_data_ptr(TensorObject* self, void* unused) {
  (void)unused;
  return PyLong_FromVoidPtr(self->tensor->dl_tensor.data);
}

static PyObject* tensor_byte_offset(TensorObject* self, void* unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong(self->tensor->dl_tensor.byte_offset);
}

static PyObject* tensor_itemsize(TensorObject* self, void* unused) {
  (void)unused;
  return PyLong_FromLongLong(dtype_item_bytes(self->tensor->dl_tensor.dtype));
}

static PyObject* tensor_device(TensorObject* self, void* unused) {
  (void)unused;
  const DLDevice d = self->tensor->dl_tensor.device;
  return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

static PyObject* tensor_flags(TensorObject* self, void* unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong(self->tensor->flags);
}

static PyObject* tensor_report(TensorObject* self, void* unused) {
  (void)unused;
  const abr_transfer_report* r = &self->report;
  const char* end = memchr(r->detail, 0, sizeof r->detail);
  const Py_ssize_t length = end ? end - r->detail : (Py_ssize_t)sizeof r->detail;
  return Py_BuildValue("(sKIN)", abr_path_string(r->path), (unsigned long long)r->bytes_moved, (unsigned)r->flags,
                       PyUnicode_DecodeUTF8(r->detail, length, "replace"));
}

/* ------------------------------------------------------------ buffer protocol */

/* The struct-module format of a dtype the buffer protocol can name, else NULL. 64-bit
 * integers are "l" where a C long has 64 bits, as NumPy's int64 is: "q" is its
 * longlong, a dtype of its own there, which np.issubdtype(..., np.int64) and
 * torch.from_numpy (for uint64) refuse. */
static const char* buffer_format(DLDataType dtype) {
  static const char *const kInts[] = {"b", "h", "i", sizeof(long) == 8 ? "l" : "q"},
                           *const kUints[] = {"B", "H", "I", sizeof(long) == 8 ? "L" : "Q"};
  const int width = dtype.bits == 8 ? 0 : dtype.bits == 16 ? 1 : dtype.bits == 32 ? 2 : dtype.bits == 64 ? 3 : -1;
  if (dtype.lanes != 1) return NULL;
  switch (dtype.code) {
    case kDLInt: return width < 0 ? NULL : kInts[width];
    case kDLUInt: return width < 0 ? NULL : kUints[width];
    case kDLFloat: return dtype.bits == 16 ? "e" : dtype.bits == 32 ? "f" : dtype.bits == 64 ? "d" : NULL;
    case kDLComplex: return dtype.bits == 64 ? "Zf" : dtype.bits == 128 ? "Zd" : NULL;
    case kDLBool: return dtype.bits == 8 ? "?" : NULL;
    default: return NULL;
  }
}

/* Whether byte strides walk the extents compactly, last dimension fastest (C) or
 * first (Fortran); extents of 1 place nothing, and an empty tensor is compact. */
static int compact_bytes(const DLTensor* t, const Py_ssize_t* strides, Py_ssize_t item, int fortran) {
  Py_ssize_t expected = item;
  for (int32_t k = 0; k < t->ndim; ++k) {
    const int32_t i = fortran ? k : t->ndim - 1 - k;
    if (t->shape[i] == 0) return 1;
    if (t->shape[i] != 1 && strides[i] != expected) return 0;
    expected *= (Py_ssize_t)t->shape[i];
  }
  return 1;
}

/* A request for neither format nor shape takes the memory as plain bytes, and
 * torch.asarray and torch.frombuffer ask so, then read them flat as any dtype= (an
 * int64 [[1, 2], [3, 4]] as float64 came back [4.9e-324, ...]). Refused, with no
 * warning: mpi4py's MPI.buffer(t) asks so too, then takes DLPack instead. Returns -1. */
static int refuse_bare_bytes(TensorObject* self) {
  PyObject* name = tensor_dtype(self, NULL);
  if (name)
    PyErr_Format(PyExc_BufferError,
                 "arraybridge: a Tensor is an array of %U, not bytes, and this consumer asked for its memory with "
                 "neither format nor shape, as torch.asarray and torch.frombuffer ask before reading it flat as any "
                 "dtype; give torch torch.from_dlpack(t) or torch.as_tensor(t), and a consumer of bytes (hashlib, a "
                 "file's write or readinto) %s",
                 name,
                 buffer_format(self->tensor->dl_tensor.dtype)
                     ? "memoryview(t)"
                     : "its bytes through DLPack (the buffer protocol has no format for this dtype), such as "
                       "torch.from_dlpack(t).view(torch.uint8)");
  Py_XDECREF(name);
  return -1;
}

/* PEP 3118 for tensors in host memory (cpu, cuda_host): memoryview, NumPy and
 * mpi4py read and write it in place, with the consumer's contiguity and
 * writability asked for checked. Device memory is refused (BufferError), so
 * consumers that fall back to DLPack (mpi4py with a CUDA-aware MPI) still can, and
 * so is a request for bare bytes (refuse_bare_bytes). */
static int tensor_getbuffer(TensorObject* self, Py_buffer* view, int flags) {
  const DLTensor* t = &self->tensor->dl_tensor;
  if (!(kind_flags(t->device.device_type) & ABR_KIND_HOST_MEMORY)) {
    PyErr_SetString(PyExc_BufferError,
                    "arraybridge: only a tensor in host memory (which the host reads in place: cpu, cuda_host) "
                    "has the buffer protocol; take this one through DLPack");
    return -1;
  }
  if (!(flags & (PyBUF_FORMAT | PyBUF_ND))) return refuse_bare_bytes(self);
  if ((flags & PyBUF_WRITABLE) && (self->tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) {
    PyErr_SetString(PyExc_BufferError, "arraybridge: the tensor is read-only");
    return -1;
  }
  if (tensor_settle((PyObject*)self) < 0) return -1; /* the reader reads as soon as this returns */
  const char* format = buffer_format(t->dtype);
  if (!format && (flags & PyBUF_FORMAT)) {
    PyObject* name = tensor_dtype(self, NULL); /* Tensor.dtype's name */
    if (name)
      PyErr_Format(PyExc_BufferError,
                   "arraybridge: the buffer protocol has no format for dtype %U; take the tensor through DLPack", name);
    Py_XDECREF(name);
    return -1;
  }
  const Py_ssize_t item = (Py_ssize_t)dtype_item_bytes(t->dtype);
  Py_ssize_t* dims = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(2 * t->ndim + 1));
  if (!dims) {
    PyErr_NoMemory();
    return -1;
  }
  Py_ssize_t count = 1, step = item;
  for (int32_t i = t->ndim - 1; i >= 0; --i) {
    dims[i] = (Py_ssize_t)t->shape[i];
    dims[t->ndim + i] = t->strides ? (Py_ssize_t)t->strides[i] * item : step;
    step *= dims[i];
    count *= dims[i];
  }
  const int c_order = compact_bytes(t, dims + t->ndim, item, 0), f_order = compact_bytes(t, dims + t->ndim, item, 1);
  const int any = (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS;
  const int refused = any ? !(c_order || f_order)
                          : ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c_order) ||
          ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f_order) ||
          ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c_order);
  if (refused) {
    PyMem_Free(dims);
    PyErr_SetString(PyExc_BufferError,
                    "arraybridge: the tensor is strided, and the consumer asked for contiguous "
                    "memory (arraybridge.mpi.buffer packs it for MPI)");
    return -1;
  }
  view->buf = (char*)t->data + t->byte_offset;
  Py_INCREF(self);
  view->obj = (PyObject*)self;
  view->len = count * item;
  view->itemsize = item;
  view->readonly = (self->tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  view->format = (flags & PyBUF_FORMAT) ? (char*)format : NULL;
  view->ndim = (flags & PyBUF_ND) == PyBUF_ND ? t->ndim : 1;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? dims : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? dims + t->ndim : NULL;
  view->suboffsets = NULL;
  view->internal = dims;
  return 0;
}

static void tensor_releasebuffer(TensorObject* self, Py_buffer* view) {
  (void)self;
  PyMem_Free(view->internal);
}

static PyBufferProcs tensor_as_buffer = {(getbufferproc)tensor_getbuffer, (releasebufferproc)tensor_releasebuffer};

static PyObject* tensor_wait(TensorObject* self, PyObject* unused) {
  (void)unused;
  if (tensor_settle((PyObject*)self) < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject* tensor_is_ready(TensorObject* self, PyObject* unused) {
  (void)unused;
  PyObject* event = tensor_tracked((PyObject*)self)->ready;
  Py_XINCREF(event); /* asking may let go of the GIL: another thread may replace it */
  const int ready = event ? event_ready(event) : 1;
  Py_XDECREF(event);
  return ready < 0 ? NULL : PyBool_FromLong(ready);
}

static PyObject* order_before(TensorObject* self, PyObject* stream, abr_event* pending) {
  uintptr_t handle = 0;
  if (parse_stream(stream, &handle) < 0) return NULL;
  const DLDevice device = self->tensor->dl_tensor.device;
  abr_runtime* runtime = handle && has_dlpack_streams(device) ? core_runtime() : NULL;
  if (!runtime) return tensor_wait(self, NULL);
  abr_status status;
  Py_BEGIN_ALLOW_THREADS
  abr_stream* consumer = NULL;
  status = abr_stream_wrap(runtime, device, (void*)handle, &consumer);
  if (status == ABR_OK) status = abr_stream_wait_event(consumer, pending);
  abr_stream_release(consumer); /* nothing of ours was queued on it: only the wait */
  Py_END_ALLOW_THREADS
  if (status != ABR_OK) {
    raise_status(status, "__dlpack__", NULL);
    return NULL;
  }
  Py_RETURN_NONE;
}

/* _order_before(stream): work the consumer queues on `stream` (a CUDA stream
 * value) from now on runs after this tensor's queued work, which the host does not
 * wait for; the host waits where the stream is not a CUDA one of this device's. */
static PyObject* tensor_order_before(TensorObject* self, PyObject* stream) {
  PyObject* event = tensor_tracked((PyObject*)self)->ready;
  if (!event) Py_RETURN_NONE;
  Py_INCREF(event);                     /* held while the GIL is let go: another thread may replace the Tensor's */
  const int ready = event_ready(event); /* raises the work's failure */
  abr_event* pending = ready == 0 ? event_handle(event) : NULL;
  PyObject* done = NULL;
  if (pending)
    done = order_before(self, stream, pending);
  else if (ready > 0)
    done = Py_None, Py_INCREF(done);
  Py_DECREF(event);
  return done;
}

static PyMethodDef tensor_methods[] = {
    {"wait", (PyCFunction)tensor_wait, METH_NOARGS,
     "wait() -> None: blocks until the work that fills this tensor is done (to_device with non_blocking=True); "
     "at once otherwise"},
    {"is_ready", (PyCFunction)tensor_is_ready, METH_NOARGS,
     "is_ready() -> whether the work that fills this tensor is done; never blocks (raises if it failed)"},
    {"_order_before", (PyCFunction)tensor_order_before, METH_O,
     "_order_before(stream) -> None: the consumer's stream waits for this tensor's queued work on the device"},
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> a DLPack capsule viewing this "
     "tensor (versioned when max_version allows it); other devices, copies and streams go through _dlpack_slow"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_shape, NULL, "the extents, a tuple of ints", NULL},
    {"strides", (getter)tensor_strides, NULL, "strides in elements, as DLPack counts them", NULL},
    {"ndim", (getter)tensor_ndim, NULL, "the number of dimensions", NULL},
    {"dtype", (getter)tensor_dtype, NULL, "the dtype's name (\"float32\")", NULL},
    {"itemsize", (getter)tensor_itemsize, NULL, "bytes per element", NULL},
    {"device", (getter)tensor_device_name, NULL, "the device's name (\"opencl:0\", \"cuda_host\")", NULL},
    {"data_ptr", (getter)tensor_data_ptr, NULL, "DLTensor.data as an int: a pointer, or the cl_mem handle on OpenCL",
     NULL},
    {"byte_offset", (getter)tensor_byte_offset, NULL, "DLTensor.byte_offset", NULL},
    {"_device", (getter)tensor_device, NULL, "(DLDeviceType value, device id)", NULL},
    {"_flags", (getter)tensor_flags, NULL, "the DLPack flags", NULL},
    {"_report", (getter)tensor_report, NULL, "(path name, bytes moved, report flags, detail)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* untracked_type(cls) -> cls rebuilt as "arraybridge.Tensor", a final type whose
 * instances the cycle collector does not track. A class statement always makes
 * tracked instances, and tracking cost a fifth of a zero-copy to_device. A Tensor's
 * own references make no cycle (what keeps its source alive sits behind the DLPack
 * deleter; its Event keeps no Tensor; its base is a Tensor made before it, with no
 * base of its own), but its torch_twin is a torch tensor, through which a cycle can
 * pass (a tensor whose attribute holds the Tensor): such a cycle is never collected,
 * as one through np.from_dlpack of a torch tensor is not either. cls must subclass
 * TensorBase and add no fields; its attributes are copied over. */
PyObject* untracked_type(PyObject* module, PyObject* cls) {
  (void)module;
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject*)cls, &TensorBaseType) ||
      ((PyTypeObject*)cls)->tp_basicsize != TensorBaseType.tp_basicsize ||
      PyDict_GetItemString(((PyTypeObject*)cls)->tp_dict, "__dict__")) { /* 3.11 keeps a __dict__ outside basicsize */
    PyErr_SetString(PyExc_TypeError, "untracked_type(cls): cls must subclass TensorBase with __slots__ = ()");
    return NULL;
  }
  static PyType_Slot slots[] = {{Py_tp_dealloc, (void*)tensor_dealloc}, {0, NULL}}; /* not subtype_dealloc */
  static PyType_Spec spec = {"arraybridge.Tensor", sizeof(TensorObject), 0, Py_TPFLAGS_DEFAULT, slots};
  PyObject* bases = PyTuple_Pack(1, (PyObject*)&TensorBaseType);
  PyObject* type = bases ? PyType_FromSpecWithBases(&spec, bases) : NULL;
  Py_XDECREF(bases);
  if (!type) return NULL;
  PyObject *key, *value;
  Py_ssize_t position = 0;
  PyObject* namespace = ((PyTypeObject*)cls)->tp_dict;
  while (PyDict_Next(namespace, &position, &key, &value)) {
    const char* name = PyUnicode_AsUTF8(key);
    if (!name) goto fail;
    if (!strcmp(name, "__module__") || !strcmp(name, "__qualname__") || !strcmp(name, "__slots__") ||
        !strcmp(name, "__dict__") || !strcmp(name, "__weakref__"))
      continue;                                            /* the new type's own, or meaningless on it */
    if (PyObject_SetAttr(type, key, value) < 0) goto fail; /* dunders also fill their C slots (__repr__) */
  }
  return type;
fail:
  Py_DECREF(type);
  return NULL;
}

PyTypeObject TensorBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "arraybridge._core.TensorBase",
    .tp_basicsize = sizeof(TensorObject),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C half of arraybridge.Tensor.",
    .tp_weaklistoffset = offsetof(TensorObject, weakrefs),
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
    .tp_as_buffer = &tensor_as_buffer,
    .tp_new = tensor_new,
};
