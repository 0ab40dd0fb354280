/*
 * to_device, from_dlpack and the transfer under them: import any DLPack source,
 * run one planned runtime transfer with the GIL released, and wrap the result in
 * an arraybridge.Tensor. Arguments other than the defaults (a dtype, a stream
 * object, a device not seen before) are parsed by the package's Python hooks.
 */
#include <string.h>

#include "core.h"

_Static_assert(sizeof(long) >= 8, "device strings are cached as (type << 32 | id) in a long");

/* A parsed request. Everything that can fail is parsed before the source is
 * consumed, so a bad argument leaves the caller's object untouched. */
typedef struct {
  int has_dst; /* 0: keep the source's device */
  DLDevice dst;
  abr_transfer_options options;
  uintptr_t stream; /* a CUDA stream handle of the CUDA side, 0 for none */
  int non_blocking; /* return once the work is queued: the Tensor holds its Event */
  const char* context;
} Request;

static int unpack_pair(PyObject* pair, DLDevice* out) {
  if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
    PyErr_SetString(PyExc_TypeError, "arraybridge: parse_device must return a (type, id) pair");
    return -1;
  }
  long type = PyLong_AsLong(PyTuple_GET_ITEM(pair, 0));
  long id = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1));
  if (PyErr_Occurred()) return -1;
  out->device_type = (DLDeviceType)type;
  out->device_id = (int32_t)id;
  return 0;
}

/* Device strings are parsed once by the Python hook, then found here. */
static int parse_device(PyObject* device, DLDevice* out) {
  static PyObject* cache; /* str -> (type << 32 | id); type < 2^31, so it fits a 64-bit long */
  if (!cache && !(cache = PyDict_New())) return -1;
  static PyObject* last; /* the last string parsed, and its device: most callers repeat one literal */
  static DLDevice last_device;
  if (device == last) {
    *out = last_device;
    return 0;
  }
  const int is_text = PyUnicode_CheckExact(device);
  if (is_text) {
    PyObject* packed = PyDict_GetItemWithError(cache, device);
    if (packed) {
      long value = PyLong_AsLong(packed); /* 64 bits here; cheaper than the unsigned conversions */
      out->device_type = (DLDeviceType)(value >> 32);
      out->device_id = (int32_t)(uint32_t)value;
      Py_INCREF(device);
      Py_XSETREF(last, device);
      last_device = *out;
      return 0;
    }
    if (PyErr_Occurred()) return -1;
  }
  PyObject* pair = PyObject_CallOneArg(hooks.parse_device, device);
  if (!pair) return -1;
  int status = unpack_pair(pair, out);
  Py_DECREF(pair);
  if (status < 0 || !is_text || PyDict_GET_SIZE(cache) >= 256) return status;
  PyObject* packed = PyLong_FromLong((long)(((uint64_t)(uint32_t)out->device_type << 32) | (uint32_t)out->device_id));
  if (!packed || PyDict_SetItem(cache, device, packed) < 0) status = -1;
  Py_XDECREF(packed);
  return status;
}

static int parse_copy(PyObject* copy, abr_copy_mode* out) {
  if (!copy || copy == Py_None)
    *out = ABR_COPY_IF_NEEDED;
  else if (copy == Py_True)
    *out = ABR_COPY_ALWAYS;
  else if (copy == Py_False)
    *out = ABR_COPY_NEVER;
  else {
    PyErr_Format(PyExc_ValueError, "arraybridge: copy must be None, True or False, not %R", copy);
    return -1;
  }
  return 0;
}

static int parse_flag(PyObject* value, uint32_t flag, uint32_t* flags) {
  if (!value) return 0;
  int truth = PyObject_IsTrue(value);
  if (truth < 0) return -1;
  if (truth) *flags |= flag;
  return 0;
}

/* contiguous=: False, True (compact row-major) or "nonnegative" (no negative stride). */
static int parse_contiguous(PyObject* value, uint32_t* flags) {
  if (value && PyUnicode_Check(value)) {
    if (PyUnicode_CompareWithASCIIString(value, "nonnegative") != 0) {
      PyErr_Format(PyExc_ValueError,
                   "arraybridge: contiguous must be True, False or \"nonnegative\" (no negative strides, as "
                   "PyTorch needs), not %R",
                   value);
      return -1;
    }
    *flags |= ABR_TRANSFER_NO_NEGATIVE_STRIDES;
    return 0;
  }
  return parse_flag(value, ABR_TRANSFER_REQUIRE_CONTIGUOUS, flags);
}

static int parse_truth(PyObject* value, int* out) {
  *out = value ? PyObject_IsTrue(value) : 0;
  return *out < 0 ? -1 : 0;
}

static int parse_dtype(PyObject* dtype, DLDataType* out) {
  if (!dtype || dtype == Py_None) return 0;
  PyObject* triple = PyObject_CallOneArg(hooks.parse_dtype, dtype);
  if (!triple) return -1;
  long code = -1, bits = -1, lanes = -1;
  if (PyTuple_Check(triple) && PyTuple_GET_SIZE(triple) == 3) {
    code = PyLong_AsLong(PyTuple_GET_ITEM(triple, 0));
    bits = PyLong_AsLong(PyTuple_GET_ITEM(triple, 1));
    lanes = PyLong_AsLong(PyTuple_GET_ITEM(triple, 2));
  }
  Py_DECREF(triple);
  if (PyErr_Occurred()) return -1;
  if (code < 0 || code > 255 || bits < 0 || bits > 255 || lanes < 0 || lanes > 65535) {
    PyErr_Format(PyExc_ValueError, "arraybridge: dtype %R is not a DLPack (code, bits, lanes) triple", dtype);
    return -1;
  }
  out->code = (uint8_t)code;
  out->bits = (uint8_t)bits;
  out->lanes = (uint16_t)lanes;
  return 0;
}

int parse_stream(PyObject* stream, uintptr_t* out) {
  if (!stream || stream == Py_None) return 0;
  PyObject* handle = PyObject_CallOneArg(hooks.stream_handle, stream);
  if (!handle) return -1;
  *out = (uintptr_t)PyLong_AsUnsignedLongLong(handle);
  Py_DECREF(handle);
  return PyErr_Occurred() ? -1 : 0;
}

/* ------------------------------------------------------------------ import */

/* Whether `t->shape` may be read for its `ndim` extents. The runtime validates every
 * field, but the shortcuts below read the shape before it is called: a producer's
 * NULL shape or wild ndim must reach the runtime's refusal, not crash them. */
static int has_readable_shape(const DLTensor* t) {
  return t->ndim >= 0 && t->ndim <= ABR_MAX_NDIM && (t->ndim == 0 || t->shape);
}

/* Whether a stride times the item size overflows 64 bits on a dim that is walked:
 * no real tensor has such strides (the runtime would refuse them). */
static int has_impossible_strides(const DLTensor* t) {
  if (!t->strides || !has_readable_shape(t)) return 0;
  const int64_t item = dtype_item_bytes(t->dtype);
  for (int32_t i = 0; i < t->ndim; ++i) {
    int64_t bytes;
    if (t->shape[i] > 1 && __builtin_mul_overflow(t->strides[i], item, &bytes)) return 1;
  }
  return 0;
}

/* A producer known to export wrong strides (CuPy 13.4 to 14.2, cupy/cupy#10172)
 * says through the hook what it meant; they replace the exported ones only where
 * both are the same byte strides modulo 2^64, so nothing else is ever reinterpreted. */
static int repair_producer_strides(PyObject* producer, DLTensor* t) {
  const int64_t item = dtype_item_bytes(t->dtype);
  PyObject* meant = PyObject_CallFunction(hooks.producer_strides, "OL", producer, (long long)item);
  if (!meant) return -1;
  int64_t fixed[64];
  int ok = meant != Py_None && PySequence_Check(meant) && PySequence_Size(meant) == t->ndim && t->ndim <= 64;
  for (int32_t i = 0; ok && i < t->ndim; ++i) {
    PyObject* value = PySequence_GetItem(meant, i);
    fixed[i] = value ? PyLong_AsLongLong(value) : -1;
    Py_XDECREF(value);
    if (PyErr_Occurred()) {
      Py_DECREF(meant);
      return -1;
    }
    ok = (uint64_t)t->strides[i] * (uint64_t)item == (uint64_t)fixed[i] * (uint64_t)item;
  }
  Py_DECREF(meant);
  if (ok)
    for (int32_t i = 0; i < t->ndim; ++i) t->strides[i] = fixed[i];
  return 0;
}

/* What the producer's framework is known to do (PRODUCER_* bits): the hook's
 * answer, asked once per type (the last type is remembered without a lookup). */
static int producer_traits(PyTypeObject* type) {
  static PyObject* answers; /* type -> int */
  static PyTypeObject* last;
  static int last_traits;
  if (type == last) return last_traits;
  if (!answers && !(answers = PyDict_New())) return -1;
  PyObject* answer = PyDict_GetItemWithError(answers, (PyObject*)type);
  if (!answer) {
    if (PyErr_Occurred()) return -1;
    PyObject* asked = PyObject_CallOneArg(hooks.producer_traits, (PyObject*)type);
    if (!asked) return -1;
    const long traits = PyLong_AsLong(asked);
    /* Kept (and the type with it) for the first 256 types; past that, asked each time. */
    const int stored = PyDict_GET_SIZE(answers) < 256 ? PyDict_SetItem(answers, (PyObject*)type, asked) : 1;
    Py_DECREF(asked);
    if (stored < 0 || (traits == -1 && PyErr_Occurred())) return -1;
    if (stored == 1) return (int)traits;
    answer = asked; /* the dict holds it */
  }
  const long traits = PyLong_AsLong(answer);
  if (traits == -1 && PyErr_Occurred()) return -1;
  last = type; /* the dict keeps the type alive */
  last_traits = (int)traits;
  return last_traits;
}

/* Read-only is kept both ways: what a framework treats as immutable, or what came
 * as a legacy capsule (which cannot say whether it may be written), is imported
 * READ_ONLY, so no writable alias of it is handed out and nothing writes into it. */
static int keep_read_only(int immutable, Imported* out) {
  return immutable || !out->versioned ? imported_mark_read_only(out) : 0;
}

static int import_capsule(PyObject* capsule, int immutable, Imported* out) {
  return consume_capsule(capsule, out) < 0 ? -1 : keep_read_only(immutable, out);
}

/* What __dlpack__ returns (versioned when the producer takes max_version, legacy
 * from one that predates DLPack 1.0), imported. */
static int import_exported(PyObject* x, const char* role, int immutable, Imported* out) {
  PyObject* call[3] = {NULL, x, names.max_version}; /* call[0]: vectorcall's spare slot */
  PyObject* capsule =
      PyObject_VectorcallMethod(names.dlpack, call + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, names.max_version_key);
  if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) { /* an old producer rejects the keyword */
    PyErr_Clear();
    capsule = PyObject_VectorcallMethod(names.dlpack, call + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
  }
  if (!capsule) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError) && !PyObject_HasAttr(x, names.dlpack)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "arraybridge: %s (a %s) is neither a DLPack capsule nor an object with __dlpack__: pass an array "
                   "(NumPy, CuPy, torch, JAX, TensorFlow, ...), an arraybridge Tensor or a DLPack capsule",
                   role, Py_TYPE(x)->tp_name);
    }
    return -1;
  }
  int status = -1;
  if (PyCapsule_CheckExact(capsule)) {
    status = consume_capsule(capsule, out);
    if (status == 0 && has_impossible_strides(imported_tensor(out)) &&
        repair_producer_strides(x, (DLTensor*)imported_tensor(out)) < 0) {
      imported_delete(out);
      status = -1;
    }
    if (status == 0) status = keep_read_only(immutable, out);
  } else
    PyErr_Format(PyExc_TypeError, "arraybridge: %s.__dlpack__() returned %s, not a DLPack capsule", Py_TYPE(x)->tp_name,
                 Py_TYPE(capsule)->tp_name);
  Py_DECREF(capsule);
  return status;
}

/* A producer's tensor through its type's DLPack C exchange table where it has one,
 * else through __dlpack__; read-only kept either way. */
static int import_from_producer(PyObject* x, const char* role, int immutable, Imported* out) {
  const int status = exchange_import(x, out);
  if (status != 0) return status < 0 ? -1 : keep_read_only(immutable, out);
  return import_exported(x, role, immutable, out);
}

/* A PyTorch tensor, exported through its exchange table first where it has one: the
 * export's dtype says whether the conjugate bit can be set at all (torch sets it on
 * complex tensors only, and is_conj() was a ninth of a small tensor's cost in a batch).
 * Then vetted (torch.c), and exported again from the copy its bits were resolved
 * into when they had to be. */
static int import_torch(PyObject* x, const char* role, ImportPurpose purpose, int immutable, Imported* out) {
  int status = exchange_import(x, out);
  if (status < 0) { /* asked again after the vet, which may find why and resolve it */
    PyErr_Clear();
    status = 0;
  }
  const int may_be_conjugate =
      status == 0 || ((DLManagedTensorVersioned*)out->tensor)->dl_tensor.dtype.code == kDLComplex;
  PyObject* resolved = NULL;
  int autograd = 0;
  if (torch_vet(x, role, purpose, may_be_conjugate, &resolved, &autograd) < 0) {
    if (status > 0) imported_delete(out);
    return -1;
  }
  immutable |= autograd;
  if (status > 0 && !resolved) return keep_read_only(immutable, out);
  if (status > 0) imported_delete(out); /* of the tensor whose bits were resolved */
  PyObject* source = resolved ? resolved : x;
  out->resolved = resolved != NULL;
  status = import_from_producer(source, role, immutable, out);
  if (status < 0) torch_refusal(x, role);
  Py_XDECREF(resolved);
  return status;
}

/* The producer's tensor, owned by the caller: a view of a Tensor, a consumed
 * capsule, what its type's DLPack C exchange API exports, or what __dlpack__
 * returns. A producer whose own export could abort the process is vetted first, and
 * a PyTorch tensor's lazy bits and autograd are checked (import_torch). */
int import_source(PyObject* x, const char* role, ImportPurpose purpose, Imported* out) {
  out->after = NULL;
  if (tensor_check(x)) {
    PyObject* ready = ((TensorObject*)x)->ready;
    if (ready && event_ready(ready) < 0) return -1; /* its queued work failed: so does every use of it */
    abr_event* pending = ready ? event_handle(ready) : NULL;
    if (pending && !out->keep_pending) { /* queued work (non_blocking) is waited for, unless the caller orders on it */
      if (event_settle(ready) < 0) return -1;
      pending = NULL;
    }
    out->after = pending; /* the view below keeps x, and so its Event, alive */
    out->tensor = new_owner_view(((TensorObject*)x)->tensor, x, 0);
    out->versioned = 1;
    out->any_thread = 1;
    out->work_stream = 0;
    out->resolved = 0;
    return out->tensor ? 0 : -1;
  }
  out->resolved = 0;
  if (PyCapsule_CheckExact(x)) return import_capsule(x, 0, out);
  const int traits = producer_traits(Py_TYPE(x));
  if (traits < 0) return -1;
  int immutable = traits & PRODUCER_IMMUTABLE;
  if (traits & PRODUCER_VETTED) {
    PyObject* vetted = PyObject_CallOneArg(hooks.vet_producer, x);
    if (!vetted) return -1;
    const int status = PyCapsule_CheckExact(vetted) ? import_capsule(vetted, immutable, out)
                                                    : import_exported(vetted, role, immutable, out);
    Py_DECREF(vetted);
    return status;
  }
  if (traits & (PRODUCER_NDARRAY | PRODUCER_HOST_BUFFER)) {
    const int read = traits & PRODUCER_NDARRAY ? import_ndarray(x, out) : import_host_buffer(x, out);
    if (read != 0) return read < 0 ? -1 : keep_read_only(immutable, out);
  }
  if (traits & PRODUCER_TORCH) return import_torch(x, role, purpose, immutable, out);
  return import_from_producer(x, role, immutable, out);
}

/* ---------------------------------------------------------------- transfer */

static void raise_error(abr_status status, const Request* request) {
  raise_status(status, request->context, request->has_dst ? &request->dst : NULL);
}

/* Logs the transfer at DEBUG through the hook, unless the logger's own cache
 * already says DEBUG is off (the cost of asking it is that of a transfer). */
static void log_transfer(PyObject* tensor, const char* context) {
  if (hooks.log_cache) {
    PyObject* enabled = PyDict_GetItemWithError(hooks.log_cache, names.debug_level);
    if (enabled == Py_False) return;
    if (!enabled) PyErr_Clear();
  }
  PyObject* done = PyObject_CallFunction(hooks.log_transfer, "Os", tensor, context);
  if (done)
    Py_DECREF(done);
  else
    PyErr_WriteUnraisable(hooks.log_transfer); /* the transfer itself succeeded */
}

/* True when the C API promises a view whatever the planner finds: the same
 * device, no forced copy, dtype or layout, no stream. The runtime still plans
 * and checks it; only the GIL is kept, since no data will move. */
static int is_view_by_contract(const Request* request, DLDevice src, DLDevice dst) {
  const abr_transfer_options* o = &request->options;
  return src.device_type == dst.device_type && src.device_id == dst.device_id && o->copy != ABR_COPY_ALWAYS &&
      o->dtype.code == 0 && o->dtype.bits == 0 && o->dtype.lanes == 0 &&
      !(o->flags & (ABR_TRANSFER_REQUIRE_CONTIGUOUS | ABR_TRANSFER_NO_NEGATIVE_STRIDES)) && !request->stream;
}

/* Host copies this small keep the GIL: releasing and retaking it (and deferring
 * the producer's deleter to a pending call) cost 0.6 us, ten times the copy of
 * 1 KiB, and 64 KiB copy in about 2 us, no longer than a switch interval's tenth. */
#define HOLD_GIL_HOST_BYTES (1u << 20)

static int is_small_host_copy(const DLTensor* src, DLDevice dst, uintptr_t stream) {
  if (src->device.device_type != kDLCPU || dst.device_type != kDLCPU || stream || !has_readable_shape(src)) return 0;
  uint64_t bytes = (uint64_t)dtype_item_bytes(src->dtype);
  for (int32_t i = 0; i < src->ndim && bytes <= HOLD_GIL_HOST_BYTES; ++i) bytes *= (uint64_t)src->shape[i];
  return bytes <= HOLD_GIL_HOST_BYTES;
}

/* A view of what the producer copied to resolve its lazy bits is no zero-copy view
 * of the producer's memory: the report says the copy. */
static void say_resolved(abr_transfer_report* report, const DLManagedTensorVersioned* out) {
  const DLTensor* t = &out->dl_tensor;
  uint64_t bytes = (uint64_t)dtype_item_bytes(t->dtype);
  for (int32_t i = 0; i < t->ndim; ++i) bytes *= (uint64_t)t->shape[i];
  report->path = t->device.device_type == kDLCPU ? ABR_PATH_HOST_COPY : ABR_PATH_DEVICE_COPY;
  report->bytes_moved = bytes;
  snprintf(report->detail, sizeof report->detail, "%s",
           "copied by the producer to resolve its conj/neg bits (torch's resolve_conj/resolve_neg), then viewed");
}

static int on_device(DLDevice a, DLDevice b) { return a.device_type == b.device_type && a.device_id == b.device_id; }

/* The device whose stream orders a transfer between `src` and `dst`: the CUDA
 * side, else the OpenCL side; 0 when both are host memory. */
static int queue_side(DLDevice src, DLDevice dst, DLDevice* out) {
  if (dst.device_type == kDLCUDA || (src.device_type != kDLCUDA && dst.device_type == kDLOpenCL))
    *out = dst;
  else if (src.device_type == kDLCUDA || src.device_type == kDLOpenCL)
    *out = src;
  else
    return 0;
  return 1;
}

/* The runtime's own stream of an OpenCL device, made on first use and kept (as the
 * runtime is) until exit: where non_blocking work goes when the caller names none.
 * NULL when 16 devices have one already (the work then runs synchronously), or
 * NULL with an exception. */
static abr_stream* own_queue(abr_runtime* runtime, DLDevice device) {
  static struct {
    DLDevice device;
    abr_stream* stream;
  } queues[16];
  static int count;
  for (int i = 0; i < count; ++i)
    if (queues[i].device.device_type == device.device_type && queues[i].device.device_id == device.device_id)
      return queues[i].stream;
  if (count == 16) return NULL;
  abr_stream* stream = NULL;
  const abr_status status = abr_stream_create(runtime, device, &stream);
  if (status != ABR_OK) {
    raise_status(status, "making a queue for non_blocking work", &device);
    return NULL;
  }
  queues[count].device = device;
  queues[count++].stream = stream;
  return stream;
}

/* The device types whose memory the host reads and writes in place (the kind
 * table's ABR_KIND_HOST_MEMORY), read at import and only read after. */
static unsigned char host_kinds[64];

int host_kinds_init(void) {
  int32_t count = 0;
  if (abr_device_kind_count(&count) != ABR_OK) {
    PyErr_SetString(PyExc_RuntimeError, "arraybridge: abr_device_kind_count failed");
    return -1;
  }
  for (int32_t i = 0; i < count; ++i) {
    abr_device_kind kind = ABR_DEVICE_KIND_INIT;
    if (abr_device_kind_get(i, &kind) == ABR_OK && (unsigned)kind.type < sizeof host_kinds)
      host_kinds[kind.type] = (kind.flags & ABR_KIND_HOST_MEMORY) != 0;
  }
  return 0;
}

/* Waits for the queued work still filling a source (a Tensor made with
 * non_blocking). With a stream, the device waits for it; but memory the host reads
 * in place (a queued read into page-locked memory) the host engine may read at once
 * (to convert it, or to pack a batch's block), so for that the host waits. */
static abr_status wait_until_filled(abr_event* after, DLDevice where, abr_stream* stream) {
  const int host_reads = (unsigned)where.device_type < sizeof host_kinds && host_kinds[where.device_type];
  return stream && !host_reads ? abr_stream_wait_event(stream, after) : abr_event_synchronize(after);
}

/* An event after the work queued so far on a producer's CUDA stream (the one its
 * exchange API named), for a view of its memory: that work may still be writing it,
 * and nothing else orders a view's readers after it (torch's __dlpack__ without a
 * stream does not synchronize: its default is -1). The view holds the event, so a
 * consumer's stream waits for it on the device and a host reader on the host. */
static abr_status after_producer(abr_runtime* runtime, DLDevice device, uintptr_t stream, abr_event** done) {
  abr_stream* producer = NULL;
  abr_status status = abr_stream_wrap(runtime, device, (void*)stream, &producer);
  if (status != ABR_OK) return status;
  status = abr_event_record(producer, done);
  abr_stream_release(producer); /* the producer's stream stays the producer's */
  return status;
}

/* Where non_blocking work goes when the caller names no stream: the legacy default
 * stream of a CUDA side (the DLPack value 1, as torch's default stream), or the
 * runtime's own queue of an OpenCL side; nothing for host memory. -1 with an exception. */
static int default_queue(abr_runtime* runtime, DLDevice src, DLDevice dst, uintptr_t* cuda, abr_stream** own) {
  DLDevice side;
  if (!queue_side(src, dst, &side)) return 0;
  if (side.device_type == kDLCUDA)
    *cuda = 1;
  else if (!(*own = own_queue(runtime, side)) && PyErr_Occurred())
    return -1;
  return 0;
}

/* After queued work: an Event the Tensor or the caller holds, or nothing when it is
 * complete already. 0, or -1 with an exception (the work waited for first): the
 * work's failure, when it failed already. */
static int hold_completion(abr_event* done, PyObject* keep, const char* context, PyObject** out) {
  *out = NULL;
  if (!done) return 0;
  const abr_status asked = abr_event_query(done);
  if (asked != ABR_NOT_READY) {
    abr_event_destroy(done);
    if (asked == ABR_OK) return 0;
    raise_status(asked, context, NULL);
    return -1;
  }
  *out = event_new(done, keep);
  if (*out) return 0;
  abr_status status; /* no room for the Event: the work is waited for instead */
  Py_BEGIN_ALLOW_THREADS
  status = abr_event_synchronize(done);
  Py_END_ALLOW_THREADS
  abr_event_destroy(done);
  (void)status;
  return -1;
}

static PyObject* run(PyObject* x, Request* request) {
  const double start = recorder ? record_clock() : 0;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  PyTypeObject* type = (PyTypeObject*)hooks.tensor_type;
  TensorObject* result = (TensorObject*)type->tp_alloc(type, 0);
  if (!result) return NULL;
  Imported src;
  src.keep_pending = request->non_blocking;
  if (import_source(x, "x", request->options.copy == ABR_COPY_NEVER ? IMPORT_NO_COPY : IMPORT_MAY_COPY, &src) < 0) {
    Py_DECREF(result);
    return NULL;
  }
  const DLDevice src_device = imported_tensor(&src)->device;
  const int resolved = src.resolved;
  const DLDevice dst = request->has_dst ? request->dst : src_device;
  if (request->stream && dst.device_type != kDLCUDA && src_device.device_type != kDLCUDA) {
    imported_delete(&src);
    Py_DECREF(result);
    return PyErr_Format(PyExc_ValueError,
                        "arraybridge: stream= orders CUDA work, and neither side of this %s is on CUDA (CPU and "
                        "OpenCL transfers here are synchronous: pass stream=None)",
                        request->context);
  }
  result->report.version = ABR_TRANSFER_REPORT_VERSION;
  request->options.report = &result->report;
  DLManagedTensorVersioned* out = NULL;
  abr_status status = ABR_OK;
  const int hold_gil = !src.after &&
      (is_view_by_contract(request, src_device, dst) ||
       is_small_host_copy(imported_tensor(&src), dst, request->stream));
  /* Data that moves waits for the producer's current stream when its exchange API
   * named one and the caller did not (the C API does not synchronize). */
  if (!hold_gil && !request->stream) request->stream = src.work_stream;
  abr_stream* own = NULL; /* with non_blocking: the queue the work goes on when none is named */
  if (!hold_gil && request->non_blocking && !request->stream &&
      default_queue(runtime, src_device, dst, &request->stream, &own) < 0) {
    imported_delete(&src);
    Py_DECREF(result);
    return NULL;
  }
  abr_event* done = NULL;
  if (hold_gil) {
    /* Releasing and taking back the GIL would cost half as much as the view itself,
     * or ten times a small host copy. Holding it, the producer's tensor goes in as
     * it is: the runtime deletes a failed or copied source now, and a view's source
     * when the Tensor dies, all with the GIL. */
    const uintptr_t producer = src.work_stream;
    status = src.versioned ? abr_to_device(runtime, src.tensor, dst, &request->options, NULL, &out)
                           : abr_to_device_legacy(runtime, src.tensor, dst, &request->options, NULL, &out);
    if (status != ABR_OK) imported_delete(&src);
    if (status == ABR_OK && producer && src_device.device_type == kDLCUDA &&
        (status = after_producer(runtime, src_device, producer, &done)) != ABR_OK) {
      if (out->deleter) out->deleter(out); /* the view goes, and the producer's tensor with it */
      out = NULL;
    }
  } else {
    DLManagedTensorVersioned* movable = imported_for_any_thread(&src);
    if (!movable) {
      Py_DECREF(result);
      return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    abr_stream* wrapped = NULL;
    if (request->stream)
      status =
          abr_stream_wrap(runtime, dst.device_type == kDLCUDA ? dst : src_device, (void*)request->stream, &wrapped);
    abr_stream* stream = wrapped ? wrapped : own;
    /* A stream the caller named, other than the producer's: it waits for the producer's queued work first. */
    if (status == ABR_OK && wrapped && src.work_stream && src.work_stream != request->stream &&
        src_device.device_type == kDLCUDA) {
      abr_stream* producer = NULL;
      status = abr_stream_wrap(runtime, src_device, (void*)src.work_stream, &producer);
      if (status == ABR_OK) status = abr_stream_wait(wrapped, producer);
      abr_stream_release(producer); /* accepts NULL; the producer's stream stays the producer's */
    }
    if (status == ABR_OK && src.after) status = wait_until_filled(src.after, src_device, stream);
    if (status == ABR_OK) status = abr_to_device(runtime, movable, dst, &request->options, stream, &out);
    if (status == ABR_OK && request->non_blocking && stream && abr_event_record(stream, &done) != ABR_OK)
      status = abr_stream_synchronize(stream); /* no event to hold: waited for now */
    if (done)
      abr_stream_release(wrapped); /* the work goes on; the runtime keeps the source until it is done */
    else if (wrapped)
      abr_stream_destroy(wrapped);                                       /* waits for the copy queued on it */
    if (status != ABR_OK && movable->deleter) movable->deleter(movable); /* the runtime leaves a failed source to us */
    Py_END_ALLOW_THREADS
  }
  core_drain(); /* deleters that ran without the GIL queued their releases */
  if (status != ABR_OK) {
    Py_DECREF(result);
    raise_error(status, request);
    return NULL;
  }
  result->tensor = out;
  if (hold_completion(done, NULL, request->context, &result->ready) < 0) {
    Py_DECREF(result); /* deletes out, the work being done */
    return NULL;
  }
  if (resolved && result->report.path == ABR_PATH_ZERO_COPY) say_resolved(&result->report, out);
  log_transfer((PyObject*)result, request->context);
  if (recorder && start) /* on when the call began: else its start was never read */
    record_transfer(request->context, src_device, out->dl_tensor.device, result->report.path,
                    result->report.bytes_moved, result->report.detail, 1, start);
  return (PyObject*)result;
}

/* A plain ValueError or TypeError the package raised as "arraybridge: <problem>"
 * while serving `call` is restated as "<call>: <problem>": the caller reads the
 * call it made, not the package's name. Exceptions of our own classes already
 * name the call; anything else passes unchanged. Always returns NULL. */
static PyObject* restated(const char* call) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (!type) return NULL;
  PyErr_NormalizeException(&type, &value, &traceback);
  if ((type == PyExc_ValueError || type == PyExc_TypeError) && value) {
    PyObject* text = PyObject_Str(value);
    const char* words = text ? PyUnicode_AsUTF8(text) : NULL;
    static const char kPrefix[] = "arraybridge: ";
    if (words && strncmp(words, kPrefix, sizeof kPrefix - 1) == 0) {
      PyErr_Format(type, "%s: %s", call, words + sizeof kPrefix - 1);
      Py_DECREF(text);
      Py_DECREF(type);
      Py_DECREF(value);
      PyObject *new_type, *new_value, *unused;
      PyErr_Fetch(&new_type, &new_value, &unused);
      Py_XDECREF(unused);
      PyErr_Restore(new_type, new_value, traceback); /* where it was raised, still */
      return NULL;
    }
    Py_XDECREF(text);
    PyErr_Clear(); /* str() itself failed: the original goes on */
  }
  PyErr_Restore(type, value, traceback);
  return NULL;
}

/* A structure of arrays (_structure.py): a list, tuple or mapping, subclasses
 * included (a state dict is an OrderedDict); read from the type's flags, which
 * CPython sets on every subclass of collections.abc.Mapping from 3.10. */
int is_structure(PyObject* x) {
  const unsigned long flags = Py_TYPE(x)->tp_flags;
#ifdef Py_TPFLAGS_MAPPING
  if (flags & Py_TPFLAGS_MAPPING) return 1;
#endif
  return (flags & (Py_TPFLAGS_LIST_SUBCLASS | Py_TPFLAGS_TUPLE_SUBCLASS | Py_TPFLAGS_DICT_SUBCLASS)) != 0;
}

static void init_request(Request* request, const char* context) {
  memset(request, 0, sizeof *request);
  request->options.version = ABR_TRANSFER_OPTIONS_VERSION;
  request->context = context;
}

const char core_to_device_doc[] =
    "to_device(x, device, *, copy=None, stream=None, dtype=None, strict=False, contiguous=False,\n"
    "          non_blocking=False)\n--\n\n"
    "Move any DLPack array (or capsule, or Tensor) to `device`; returns a Tensor.\n\n"
    "device: \"cpu\", \"cuda:N\", \"cuda_host\", \"opencl:N\", a (DLDeviceType, id) pair or a\n"
    "Device from devices(). copy: None = a view when possible, True = always a new\n"
    "buffer, False = a view or ValueError. dtype: convert on the way. strict: refuse\n"
    "any path that stages through host memory. contiguous=True: a view must be compact\n"
    "row-major, else it is copied (for consumers such as JAX that take nothing else);\n"
    "contiguous=\"nonnegative\": a view may be strided but must have no negative\n"
    "stride (PyTorch holds none: a flipped view is copied compact).\n"
    "stream: for a transfer with a CUDA side, the CUDA stream whose queued work it\n"
    "follows (a DLPack stream value: 1 legacy default, 2 per-thread, or a handle;\n"
    "or a CuPy/PyTorch stream object); the result is ready when the call returns,\n"
    "unless non_blocking=True: then the call returns once the work is queued (on\n"
    "`stream`, the producer's current stream, else the legacy default stream of the\n"
    "CUDA side, or the runtime's queue of an OpenCL side). The Tensor holds the work's\n"
    "Event: t.wait() blocks until it is done, t.is_ready() asks; __dlpack__(stream=s)\n"
    "makes a consumer's CUDA stream wait for it on the device, and every other export\n"
    "(NumPy, the buffer protocol) waits on the host. x is kept alive until then.\n"
    "A view of a CUDA tensor whose framework names its current stream (through its\n"
    "exchange API) holds such an Event too, after the work queued there so far.\n"
    "When x's type has a DLPack C exchange API (PyTorch, tvm-ffi), x is taken through\n"
    "it and, with stream=None, a copy follows that framework's current stream.\n"
    "A view is read-only when x is: read-only data, JAX and TensorFlow arrays (immutable\n"
    "to their frameworks) and legacy capsules (which cannot say otherwise); a copy is\n"
    "the caller's to write. The value and dtype never change unless dtype= asks.\n"
    "The path taken is in `.report` and logged at DEBUG on the \"arraybridge\" logger.\n"
    "x may also be a mapping (a dict, a torch state dict), list or tuple of arrays,\n"
    "nested, subclasses included: the same structure comes back, of the same type\n"
    "where it can be rebuilt, every array moved by one batch (see to_device_many); a\n"
    "failure names the array's place in it (x['fc.weight']).";

PyObject* core_to_device(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"x",     "device", "copy",       "stream",
                                       "dtype", "strict", "contiguous", "non_blocking"};
  static PyObject* interned[8];
  PyObject* a[8];
  if (hooks_ready() < 0 || parse_arguments("to_device", args, nargs, kwnames, kNames, interned, 8, 2, 2, a) < 0)
    return NULL;
  /* A structure of arrays (nested lists, tuples, mappings) moves in one batch, rebuilt in Python. */
  if (is_structure(a[0])) return PyObject_Vectorcall(hooks.to_device_structure, args, (size_t)nargs, kwnames);
  Request request;
  init_request(&request, "to_device");
  request.has_dst = 1;
  if (parse_device(a[1], &request.dst) < 0 || parse_copy(a[2], &request.options.copy) < 0 ||
      parse_stream(a[3], &request.stream) < 0 || parse_dtype(a[4], &request.options.dtype) < 0 ||
      parse_flag(a[5], ABR_TRANSFER_NO_HOST_STAGING, &request.options.flags) < 0 ||
      parse_contiguous(a[6], &request.options.flags) < 0 || parse_truth(a[7], &request.non_blocking) < 0)
    return restated("to_device");
  PyObject* result = run(a[0], &request);
  return result ? result : restated("to_device");
}

/* Waits for each distinct producer stream of `imports` (exchange APIs that
 * exported without a sync); the GIL must be released. */
static abr_status wait_for_producers(abr_runtime* runtime, const Imported* imports, DLManagedTensorVersioned** tensors,
                                     Py_ssize_t n) {
  abr_status status = ABR_OK;
  for (Py_ssize_t i = 0; i < n && status == ABR_OK; ++i) {
    const uintptr_t stream = imports[i].work_stream;
    Py_ssize_t seen = 0;
    while (seen < i && imports[seen].work_stream != stream) ++seen;
    if (!stream || seen < i) continue;
    abr_stream* producer = NULL;
    status = abr_stream_wrap(runtime, tensors[i]->dl_tensor.device, (void*)stream, &producer);
    if (status == ABR_OK) status = abr_stream_synchronize(producer);
    abr_stream_destroy(producer);
  }
  return status;
}

const char core_to_device_many_doc[] =
    "to_device_many(xs, device, *, copy=None, dtype=None, strict=False, contiguous=False,\n"
    "               non_blocking=False)\n--\n\n"
    "Move every DLPack array of the list xs to `device` in one runtime call; returns\n"
    "a list of Tensors in xs's order. Small copies from host memory are packed into\n"
    "one block and moved with one copy (their Tensors share one allocation, freed\n"
    "with the last). All or nothing: on failure no Tensor is made and the message\n"
    "names the failing index. The keywords mean what they mean for to_device; with\n"
    "non_blocking=True the batch is queued on one stream (the producers' current one,\n"
    "else the legacy default stream of a CUDA side or the runtime's queue of an OpenCL\n"
    "side) and every Tensor holds the batch's one Event.";

/* Deletes the first `count` imports: `movable` ones through their deleters (the
 * runtime leaves a failed batch's sources to us), the rest as imported. */
static void delete_imports(Imported* imports, DLManagedTensorVersioned** movable, Py_ssize_t count) {
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (movable[i]) {
      if (movable[i]->deleter) movable[i]->deleter(movable[i]);
    } else {
      imported_delete(&imports[i]);
    }
  }
}

/* The structure check of to_device's flat list, here: as a generator in Python it
 * cost about 300 instructions per item of a 1000-array batch, a twentieth of it. */
PyObject* core_is_flat(PyObject* module, PyObject* list) {
  (void)module;
  if (!PyList_CheckExact(list)) Py_RETURN_FALSE;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); ++i)
    if (is_structure(PyList_GET_ITEM(list, i))) Py_RETURN_FALSE;
  Py_RETURN_TRUE;
}

/* "<name>[<index>]" into `out` (32 bytes; a name of at most 8 characters), a batch
 * item's place for its errors, written by hand: snprintf cost a tenth of an import. */
static void name_place(char* out, const char* name, Py_ssize_t index) {
  size_t at = strlen(name);
  if (at > 8) at = 8;
  memcpy(out, name, at);
  out[at++] = '[';
  char digits[24];
  int length = 0;
  do digits[length++] = (char)('0' + index % 10);
  while ((index /= 10) != 0);
  while (length) out[at++] = digits[--length];
  out[at++] = ']';
  out[at] = '\0';
}

/* The pending exception of a batch item's import restated as "<place>: <message>"
 * (a producer's own refusal names no place): in its own class, with its attributes
 * (an ArrayBridgeError's status), chained to the original. Left as it is when it
 * names the place already, is Python's memory running out, or its class is not
 * made from one message. Returns -1. */
static int failed_at(const char* place) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (!value || !PyErr_GivenExceptionMatches(value, PyExc_Exception) ||
      PyErr_GivenExceptionMatches(value, PyExc_MemoryError)) { /* a SystemExit or KeyboardInterrupt goes as it is */
    PyErr_Restore(type, value, traceback);
    return -1;
  }
  PyObject* text = PyObject_Str(value);
  const char* words = text ? PyUnicode_AsUTF8(text) : NULL;
  PyObject* named = NULL;
  if (words && !strstr(words, place)) {
    static const char kPrefix[] = "arraybridge: ";
    if (strncmp(words, kPrefix, sizeof kPrefix - 1) == 0) words += sizeof kPrefix - 1;
    PyObject* message = PyUnicode_FromFormat("%s: %s", place, words);
    named = message ? PyObject_CallOneArg(type, message) : NULL;
    PyObject* attributes = named ? PyObject_GetAttrString(value, "__dict__") : NULL;
    PyObject* copied = attributes ? PyDict_Copy(attributes) : NULL;
    if (!copied || !PyObject_TypeCheck(named, (PyTypeObject*)type) ||
        PyObject_SetAttrString(named, "__dict__", copied) < 0)
      Py_CLEAR(named);
    Py_XDECREF(copied);
    Py_XDECREF(attributes);
    Py_XDECREF(message);
  }
  Py_XDECREF(text);
  PyErr_Clear(); /* whatever failed above: the original goes on as it is */
  if (!named) {
    PyErr_Restore(type, value, traceback);
    return -1;
  }
  PyException_SetCause(named, value); /* steals value */
  PyErr_Restore(type, named, traceback);
  return -1;
}

PyObject* core_to_device_many(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"xs", "device", "copy", "dtype", "strict", "contiguous", "non_blocking"};
  static PyObject* interned[7];
  PyObject* a[7];
  if (hooks_ready() < 0 || parse_arguments("to_device_many", args, nargs, kwnames, kNames, interned, 7, 2, 2, a) < 0)
    return NULL;
  Request request;
  init_request(&request, "to_device");
  request.has_dst = 1;
  if (parse_device(a[1], &request.dst) < 0 || parse_copy(a[2], &request.options.copy) < 0 ||
      parse_dtype(a[3], &request.options.dtype) < 0 ||
      parse_flag(a[4], ABR_TRANSFER_NO_HOST_STAGING, &request.options.flags) < 0 ||
      parse_contiguous(a[5], &request.options.flags) < 0 || parse_truth(a[6], &request.non_blocking) < 0)
    return restated("to_device");
  const double start = recorder ? record_clock() : 0;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  PyObject* xs = PySequence_Fast(a[0], "arraybridge: to_device_many takes a list of arrays");
  if (!xs) return restated("to_device");
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(xs);
  PyObject* results = PyList_New(n);
  Imported* imports = (Imported*)calloc((size_t)(n ? n : 1), sizeof *imports);
  DLManagedTensorVersioned** movable = (DLManagedTensorVersioned**)calloc((size_t)(n ? n : 1), sizeof *movable);
  DLManagedTensorVersioned** out = (DLManagedTensorVersioned**)calloc((size_t)(n ? n : 1), sizeof *out);
  PyTypeObject* type = (PyTypeObject*)hooks.tensor_type;
  Py_ssize_t imported = 0;
  PyObject* answer = NULL;
  if (!results || !imports || !movable || !out) {
    PyErr_NoMemory();
    goto done;
  }
  /* Every Tensor is made before any source is taken: nothing can fail after the move. */
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* tensor = type->tp_alloc(type, 0);
    if (!tensor) goto done;
    ((TensorObject*)tensor)->report.version = ABR_TRANSFER_REPORT_VERSION;
    PyList_SET_ITEM(results, i, tensor);
  }
  const ImportPurpose purpose = request.options.copy == ABR_COPY_NEVER ? IMPORT_NO_COPY : IMPORT_MAY_COPY;
  for (; imported < n; ++imported) {
    imports[imported].keep_pending = request.non_blocking;
    char role[32];
    name_place(role, "x", imported);
    if (import_source(PySequence_Fast_GET_ITEM(xs, imported), role, purpose, &imports[imported]) < 0) {
      failed_at(role);
      goto done;
    }
  }
  DLDevice imported_from = {(DLDeviceType)0, 0}; /* for a recording: the sources' one device (type 0: several) */
  for (Py_ssize_t i = 0; recorder && i < n; ++i) {
    const DLDevice d = imported_tensor(&imports[i])->device;
    if (i == 0)
      imported_from = d;
    else if (d.device_type != imported_from.device_type || d.device_id != imported_from.device_id)
      imported_from.device_type = (DLDeviceType)0;
  }
  /* Host arrays to the CPU, 1 MiB in all, move with the GIL held (as one small host
   * copy does): the producers' versioned tensors go in as they are, and their
   * deleters run here. Otherwise each is made safe to delete on any thread. */
  uint64_t host_bytes = 0;
  int hold_gil = request.dst.device_type == kDLCPU;
  for (Py_ssize_t i = 0; i < n && hold_gil; ++i) {
    const DLTensor* t = imported_tensor(&imports[i]);
    hold_gil = imports[i].versioned && is_small_host_copy(t, request.dst, 0);
    if (!hold_gil) break; /* t's shape may be unreadable */
    uint64_t bytes = (uint64_t)dtype_item_bytes(t->dtype);
    for (int32_t d = 0; d < t->ndim; ++d) bytes *= (uint64_t)t->shape[d];
    host_bytes += bytes;
  }
  hold_gil = hold_gil && host_bytes <= HOLD_GIL_HOST_BYTES;
  for (Py_ssize_t i = 0; i < n; ++i) hold_gil = hold_gil && !imports[i].work_stream && !imports[i].after;
  /* non_blocking: one stream for the batch, on the side queue_side picks (a source
   * side only when every source is on that one device); host-only batches run now. */
  uintptr_t queue = 0, producers = 0; /* producers: their one current stream, when the batch runs on it */
  abr_stream* own = NULL;
  DLDevice queue_device = request.dst;
  if (request.non_blocking && n > 0 && queue_side(imported_tensor(&imports[0])->device, request.dst, &queue_device)) {
    int one_side = 1;
    for (Py_ssize_t i = 0; i < n; ++i) {
      const DLDevice d = imported_tensor(&imports[i])->device;
      if (queue_device.device_type != request.dst.device_type || queue_device.device_id != request.dst.device_id)
        one_side = one_side && d.device_type == queue_device.device_type && d.device_id == queue_device.device_id;
    }
    queue = imports[0].work_stream; /* the producers' current stream, when they all name the same one */
    for (Py_ssize_t i = 1; i < n; ++i) queue = imports[i].work_stream == queue ? queue : 0;
    producers = queue;
    if (!one_side) {
      queue = producers = 0;
    } else if (!queue && default_queue(runtime, imported_tensor(&imports[0])->device, request.dst, &queue, &own) < 0) {
      delete_imports(imports, movable, n);
      imported = 0;
      goto done;
    }
    hold_gil = hold_gil && !queue && !own;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    movable[i] = hold_gil ? (DLManagedTensorVersioned*)imports[i].tensor : imported_for_any_thread(&imports[i]);
    if (!movable[i]) { /* deleted already; the later ones are not movable yet */
      for (Py_ssize_t j = i + 1; j < n; ++j) imported_delete(&imports[j]);
      imported = i;
      goto done;
    }
  }
  abr_batch_report report;
  memset(&report, 0, sizeof report);
  report.version = ABR_BATCH_REPORT_VERSION;
  abr_status status;
  abr_event* batch_done = NULL;
  if (hold_gil) {
    status = abr_to_device_many(runtime, movable, (size_t)n, request.dst, &request.options, NULL, out, &report);
    if (status != ABR_OK) delete_imports(imports, movable, n);
  } else {
    Py_BEGIN_ALLOW_THREADS
    abr_stream* wrapped = NULL;
    status = queue ? abr_stream_wrap(runtime, queue_device, (void*)queue, &wrapped) : ABR_OK;
    abr_stream* stream = wrapped ? wrapped : own;
    /* Arrays imported without a sync (exchange APIs) are read after the work their
     * producers' current streams had queued: each such stream is waited for once,
     * and Tensors still being filled after their work (wait_until_filled). */
    if (status == ABR_OK && !(stream && queue == producers)) status = wait_for_producers(runtime, imports, movable, n);
    for (Py_ssize_t i = 0; i < n && status == ABR_OK; ++i)
      if (imports[i].after) status = wait_until_filled(imports[i].after, imported_tensor(&imports[i])->device, stream);
    if (status == ABR_OK)
      status = abr_to_device_many(runtime, movable, (size_t)n, request.dst, &request.options, stream, out, &report);
    if (status == ABR_OK && stream && abr_event_record(stream, &batch_done) != ABR_OK)
      status = abr_stream_synchronize(stream);
    if (batch_done)
      abr_stream_release(wrapped);
    else if (wrapped)
      abr_stream_destroy(wrapped);
    if (status != ABR_OK) delete_imports(imports, movable, n);
    Py_END_ALLOW_THREADS
  }
  imported = 0; /* consumed, or deleted just now */
  core_drain();
  if (status != ABR_OK) {
    raise_error(status, &request);
    goto done;
  }
  const size_t detail_size = strlen(report.detail) + 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    TensorObject* tensor = (TensorObject*)PyList_GET_ITEM(results, i);
    tensor->tensor = out[i];
    memcpy(tensor->report.detail, report.detail, detail_size); /* the batch's line */
  }
  PyObject* ready = NULL; /* the batch's one Event, held by every Tensor */
  if (hold_completion(batch_done, NULL, "to_device_many", &ready) < 0) goto done; /* the results go with `results` */
  for (Py_ssize_t i = 0; ready && i < n; ++i) {
    Py_INCREF(ready);
    ((TensorObject*)PyList_GET_ITEM(results, i))->ready = ready;
  }
  Py_XDECREF(ready);
  if (recorder && start && n > 0)
    record_transfer("to_device_many", imported_from, request.dst, ABR_PATH_NONE, report.bytes_moved, report.detail, n,
                    start);
  answer = results;
  results = NULL;
done:
  delete_imports(imports, movable, imported);
  Py_XDECREF(results);
  Py_DECREF(xs);
  free(imports);
  free(movable);
  free(out);
  return answer ? answer : restated("to_device");
}

const char core_from_dlpack_doc[] =
    "from_dlpack(x, *, device=None, copy=None)\n--\n\n"
    "Import any DLPack producer or capsule as a Tensor: zero-copy on its own device,\n"
    "or moved to `device`; copy as in to_device.";

PyObject* core_from_dlpack(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"x", "device", "copy"};
  static PyObject* interned[3];
  PyObject* a[3];
  if (hooks_ready() < 0 || parse_arguments("from_dlpack", args, nargs, kwnames, kNames, interned, 3, 1, 1, a) < 0)
    return NULL;
  Request request;
  init_request(&request, "from_dlpack");
  if (a[1] && a[1] != Py_None) {
    request.has_dst = 1;
    if (parse_device(a[1], &request.dst) < 0) return restated("from_dlpack");
  }
  if (parse_copy(a[2], &request.options.copy) < 0) return restated("from_dlpack");
  PyObject* result = run(a[0], &request);
  return result ? result : restated("from_dlpack");
}

/* abr_copy_versioned after the producers' current streams (from their exchange
 * APIs; NULL devices: none): on the destination's, which first waits for the
 * source's, else on `own`. Without `done` destroying the wrapped streams waits for
 * the copy; with it (non_blocking) *done is an event after the copy, or NULL when
 * the copy was waited for. */
static abr_status copy_following(abr_runtime* runtime, DLManagedTensorVersioned* src, DLManagedTensorVersioned* dst,
                                 const abr_transfer_options* options, const DLDevice* src_device, uintptr_t src_stream,
                                 const DLDevice* dst_device, uintptr_t dst_stream, abr_stream* own, abr_event** done) {
  abr_stream *after_src = NULL, *after_dst = NULL;
  abr_status status = ABR_OK;
  if (src_device) status = abr_stream_wrap(runtime, *src_device, (void*)src_stream, &after_src);
  if (status == ABR_OK && dst_device) status = abr_stream_wrap(runtime, *dst_device, (void*)dst_stream, &after_dst);
  if (status == ABR_OK && after_src && after_dst) status = abr_stream_wait(after_dst, after_src);
  abr_stream* stream = after_dst ? after_dst : after_src ? after_src : own;
  if (status == ABR_OK) status = abr_copy_versioned(runtime, src, dst, options, stream);
  if (status == ABR_OK && done && stream && abr_event_record(stream, done) != ABR_OK)
    status = abr_stream_synchronize(stream);
  void (*let_go)(abr_stream*) = done && *done ? abr_stream_release : abr_stream_destroy;
  let_go(after_dst);
  let_go(after_src);
  return status;
}

const char core_copy_doc[] =
    "copy(src, dst, *, strict=False, non_blocking=False)\n--\n\n"
    "Copy the elements of src into the existing array dst, in place: the same shape,\n"
    "any strides on either side, a dtype difference converted. Both are any DLPack\n"
    "producers (or capsules) and stay the caller's. This is how data reaches memory\n"
    "another library owns, such as a buffer in pyclesperanto's OpenCL context.\n"
    "strict: refuse any path that stages through host memory (the planner decides).\n"
    "src and dst may also be structures of the same shape (nested mappings, lists and\n"
    "tuples of arrays, a state dict): every pair is copied in one batch (see copy_many).\n"
    "A torch destination's version counter is bumped, as torch's in-place ops do, so\n"
    "a backward pass that saved it raises instead of using the new values.\n"
    "non_blocking: return once the copy is queued, with an Event to wait on (None when\n"
    "it is done already); both arrays are kept alive until then. A copy with a CUDA\n"
    "side is queued on the producer's current stream, else the legacy default stream;\n"
    "one with an OpenCL side on the runtime's queue of that device.";

PyObject* core_copy(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"src", "dst", "strict", "non_blocking"};
  static PyObject* interned[4];
  PyObject* a[4];
  if (hooks_ready() < 0 || parse_arguments("copy", args, nargs, kwnames, kNames, interned, 4, 2, 2, a) < 0) return NULL;
  /* Structures of arrays (nested lists, tuples, mappings) copy in one batch, matched in Python. */
  if (is_structure(a[0])) return PyObject_Vectorcall(hooks.copy_structure, args, (size_t)nargs, kwnames);
  abr_transfer_options options;
  memset(&options, 0, sizeof options);
  options.version = ABR_TRANSFER_OPTIONS_VERSION;
  int non_blocking = 0;
  if (parse_flag(a[2], ABR_TRANSFER_NO_HOST_STAGING, &options.flags) < 0 || parse_truth(a[3], &non_blocking) < 0)
    return NULL;
  const double start = recorder ? record_clock() : 0;
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT; /* asked for only by a recording */
  if (recorder) options.report = &report;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  Imported dst_source = {0}, src_source = {0};
  if (import_source(a[1], "dst", IMPORT_DESTINATION, &dst_source) < 0) return restated("copy");
  DLManagedTensorVersioned* dst = imported_for_any_thread(&dst_source);
  if (!dst) return restated("copy");
  DLManagedTensorVersioned* src =
      import_source(a[0], "src", IMPORT_MAY_COPY, &src_source) < 0 ? NULL : imported_for_any_thread(&src_source);
  abr_status status = ABR_OK;
  abr_event* done = NULL;
  const DLDevice dst_device = dst->dl_tensor.device;
  const DLDevice src_device = src ? src->dl_tensor.device : dst_device;
  if (src) {
    uintptr_t src_stream = src_source.work_stream, dst_stream = dst_source.work_stream;
    abr_stream* own = NULL;
    if (non_blocking && !src_stream && !dst_stream) {
      uintptr_t cuda = 0;
      if (default_queue(runtime, src_device, dst_device, &cuda, &own) < 0)
        status = ABR_ERR_INVALID_ARGUMENT;
      else if (cuda && dst_device.device_type == kDLCUDA)
        dst_stream = cuda;
      else
        src_stream = cuda;
    }
    if (status != ABR_OK) {
      /* default_queue raised */
    } else if (!non_blocking && is_small_host_copy(&src->dl_tensor, dst_device, src_stream | dst_stream)) {
      status = abr_copy_versioned(runtime, src, dst, &options, NULL);
    } else {
      Py_BEGIN_ALLOW_THREADS
      status = copy_following(runtime, src, dst, &options, src_stream ? &src_device : NULL, src_stream,
                              dst_stream ? &dst_device : NULL, dst_stream, own, non_blocking ? &done : NULL);
      Py_END_ALLOW_THREADS
    }
  }
  /* Queued work keeps both views (and so both arrays) until it is done: the Event holds them. */
  PyObject* both = done ? keep_views(src, dst) : NULL;
  if (done && !both) { /* no room to keep them: waited for instead */
    Py_BEGIN_ALLOW_THREADS
    abr_event_synchronize(done);
    Py_END_ALLOW_THREADS
    abr_event_destroy(done);
    done = NULL;
  }
  if (!both) {
    if (src && src->deleter) src->deleter(src); /* with the GIL held: finishes at once */
    if (dst->deleter) dst->deleter(dst);
  }
  core_drain();
  if (!src || PyErr_Occurred()) {
    Py_XDECREF(both);
    return restated("copy");
  }
  if (status != ABR_OK) {
    Request request;
    init_request(&request, "copy");
    raise_error(status, &request);
    return NULL;
  }
  PyObject* event = NULL;
  const int held = hold_completion(done, both, "copy", &event);
  Py_XDECREF(both);
  if (held < 0) return NULL;
  if (recorder && start)
    record_transfer("copy", src_device, dst_device, report.path, report.bytes_moved, report.detail, 1, start);
  if (event) return event;
  Py_RETURN_NONE;
}

/* abr_copy_many takes plain DLTensors, which carry no flags: a READ_ONLY destination
 * (a read-only array, a legacy capsule, a JAX or TensorFlow array) is refused here,
 * with copy's exception class and the destination's place, before anything moves. */
static int refuse_read_only(const DLManagedTensorVersioned* dst, const char* role) {
  if (!(dst->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) return 0;
  PyObject* like = PyObject_CallFunction(hooks.error, "isO", (int)ABR_ERR_READ_ONLY, "copy", Py_None);
  PyObject* name = like ? PyObject_GetAttrString(like, "status_name") : NULL;
  PyObject* refusal = name
      ? PyObject_CallFunction((PyObject*)Py_TYPE(like), "NiO",
                              PyUnicode_FromFormat("copy: %s is marked READ_ONLY (a read-only array, a legacy "
                                                   "DLPack capsule, a JAX or TensorFlow array): copy into a "
                                                   "writable array",
                                                   role),
                              (int)ABR_ERR_READ_ONLY, name)
      : NULL;
  if (refusal) PyErr_SetObject((PyObject*)Py_TYPE(refusal), refusal);
  Py_XDECREF(refusal);
  Py_XDECREF(name);
  Py_XDECREF(like);
  return -1;
}

const char core_copy_many_doc[] =
    "copy_many(srcs, dsts, *, strict=False, non_blocking=False)\n--\n\n"
    "copy(srcs[i], dsts[i]) for every pair of two lists of the same length, in one\n"
    "runtime call: every pair is checked before anything moves (a bad pair names its\n"
    "place and moves nothing), and the copies on one device wait for it once. Large\n"
    "pageable arrays to or from a device (a state dict into a model's parameters)\n"
    "move through one pipeline per device, where no other pair touches their memory.\n"
    "non_blocking: return once the copies are queued, with an Event to wait on (None\n"
    "when they are done already), which keeps every array alive until then. They are\n"
    "queued on one stream, as copy queues one pair: that of the first pair's device\n"
    "side, when every pair has that device on one side; otherwise they run now.";

/* The one device of `count` tensors, for a recording; device type 0 when they differ. */
static DLDevice one_device(const DLTensor* const* tensors, Py_ssize_t count) {
  DLDevice device = tensors[0]->device;
  for (Py_ssize_t i = 1; i < count; ++i)
    if (tensors[i]->device.device_type != device.device_type || tensors[i]->device.device_id != device.device_id)
      device.device_type = (DLDeviceType)0;
  return device;
}

PyObject* core_copy_many(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"srcs", "dsts", "strict", "non_blocking"};
  static PyObject* interned[4];
  PyObject* a[4];
  if (hooks_ready() < 0 || parse_arguments("copy_many", args, nargs, kwnames, kNames, interned, 4, 2, 2, a) < 0)
    return NULL;
  abr_transfer_options options;
  memset(&options, 0, sizeof options);
  options.version = ABR_TRANSFER_OPTIONS_VERSION;
  int non_blocking = 0;
  if (parse_flag(a[2], ABR_TRANSFER_NO_HOST_STAGING, &options.flags) < 0 || parse_truth(a[3], &non_blocking) < 0)
    return NULL;
  const double start = recorder ? record_clock() : 0;
  abr_batch_report report = ABR_BATCH_REPORT_INIT; /* asked for only by a recording */
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  PyObject* srcs = PySequence_Fast(a[0], "arraybridge: copy_many takes a list of source arrays");
  if (!srcs) return restated("copy");
  PyObject* dsts = PySequence_Fast(a[1], "arraybridge: copy_many takes a list of destination arrays");
  if (!dsts) {
    Py_DECREF(srcs);
    return restated("copy");
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(srcs);
  PyObject* answer = NULL;
  Imported* imports = NULL; /* the sources, then the destinations */
  DLManagedTensorVersioned** movable = NULL;
  const DLTensor** tensors = NULL;
  Py_ssize_t imported = 0;
  if (PySequence_Fast_GET_SIZE(dsts) != n) {
    PyErr_Format(PyExc_ValueError, "arraybridge: %zd sources but %zd destinations", n, PySequence_Fast_GET_SIZE(dsts));
    goto done;
  }
  imports = (Imported*)calloc((size_t)(2 * n + 1), sizeof *imports);
  movable = (DLManagedTensorVersioned**)calloc((size_t)(2 * n + 1), sizeof *movable);
  tensors = (const DLTensor**)calloc((size_t)(2 * n + 1), sizeof *tensors);
  if (!imports || !movable || !tensors) {
    PyErr_NoMemory();
    goto done;
  }
  for (; imported < 2 * n; ++imported) {
    const int source = imported < n;
    const Py_ssize_t place = source ? imported : imported - n;
    char role[32];
    name_place(role, source ? "src" : "dst", place);
    PyObject* item = PySequence_Fast_GET_ITEM(source ? srcs : dsts, place);
    if (import_source(item, role, source ? IMPORT_MAY_COPY : IMPORT_DESTINATION, &imports[imported]) < 0) {
      failed_at(role);
      goto done;
    }
    movable[imported] = imported_for_any_thread(&imports[imported]);
    if (!movable[imported]) goto done; /* deleted already */
    tensors[imported] = &movable[imported]->dl_tensor;
    if (!source && refuse_read_only(movable[imported], role) < 0) {
      ++imported; /* taken: given back below */
      goto done;
    }
  }
  /* non_blocking: one stream for every pair, on the side queue_side picks for the
   * first pair, when every pair has that device on one side; else the copies run now. */
  DLDevice queue_device = {kDLCPU, 0};
  int queued = non_blocking && n > 0 && queue_side(tensors[0]->device, tensors[n]->device, &queue_device);
  for (Py_ssize_t i = 0; queued && i < n; ++i)
    queued = on_device(tensors[i]->device, queue_device) || on_device(tensors[n + i]->device, queue_device);
  uintptr_t cuda = 0;
  abr_stream* own = NULL;
  if (queued && default_queue(runtime, tensors[0]->device, tensors[n]->device, &cuda, &own) < 0) goto done;
  abr_status status;
  abr_event* copied = NULL; /* with non_blocking: after the copies, which the Event's caller waits for */
  Py_BEGIN_ALLOW_THREADS
  abr_stream* wrapped = NULL;
  status = wait_for_producers(runtime, imports, movable, 2 * n);
  if (status == ABR_OK && queued && cuda) status = abr_stream_wrap(runtime, queue_device, (void*)cuda, &wrapped);
  abr_stream* stream = wrapped ? wrapped : queued ? own : NULL;
  if (status == ABR_OK)
    status = abr_copy_many(runtime, tensors, tensors + n, (size_t)n, &options, stream, recorder ? &report : NULL);
  if (status == ABR_OK && stream && abr_event_record(stream, &copied) != ABR_OK)
    status = abr_stream_synchronize(stream);
  if (status != ABR_OK && stream) abr_stream_synchronize(stream); /* earlier pairs' work may use the views */
  if (copied)
    abr_stream_release(wrapped);
  else if (wrapped)
    abr_stream_destroy(wrapped);
  Py_END_ALLOW_THREADS
  if (status != ABR_OK) {
    Request request;
    init_request(&request, "copy");
    raise_error(status, &request);
    goto done;
  }
  /* Queued work keeps every view (and so every array) until it is done: the Event holds them. */
  PyObject* kept = copied ? keep_many(movable, 2 * n) : NULL;
  if (copied && !kept) { /* no room to keep them: waited for instead (MemoryError raised) */
    Py_BEGIN_ALLOW_THREADS
    abr_event_synchronize(copied);
    Py_END_ALLOW_THREADS
    abr_event_destroy(copied);
    goto done;
  }
  if (kept) imported = 0; /* the Event's now */
  PyObject* event = NULL;
  const int held = hold_completion(copied, kept, "copy", &event);
  Py_XDECREF(kept);
  if (held < 0) goto done;
  if (recorder && start && n > 0)
    record_transfer("copy_many", one_device(tensors, n), one_device(tensors + n, n), ABR_PATH_NONE, report.bytes_moved,
                    report.detail, n, start);
  answer = event ? event : Py_None;
  if (!event) Py_INCREF(answer);
done:
  for (Py_ssize_t i = 0; i < imported; ++i) /* borrowed: every import goes back */
    if (movable[i] && movable[i]->deleter) movable[i]->deleter(movable[i]);
  core_drain();
  Py_DECREF(srcs);
  Py_DECREF(dsts);
  free(imports);
  free(movable);
  free(tensors);
  return answer ? answer : restated("copy");
}

/* transfer(x, dst, copy, context): for Tensor._dlpack_slow; dst a (type, id) pair. */
PyObject* core_transfer(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (hooks_ready() < 0) return NULL;
  if (nargs != 4 || !PyUnicode_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError, "transfer(x, dst, copy, context)");
    return NULL;
  }
  Request request;
  init_request(&request, PyUnicode_AsUTF8(args[3]));
  request.has_dst = 1;
  if (!request.context || unpack_pair(args[1], &request.dst) < 0 || parse_copy(args[2], &request.options.copy) < 0)
    return NULL;
  return run(args[0], &request);
}
