/*
 * The import of a transfer's source or destination: any DLPack producer (a
 * capsule, __dlpack__, a type's DLPack C exchange API, PyTorch's table, an
 * arraybridge Tensor) into a DLManagedTensorVersioned the caller owns, with the
 * producer's known faults repaired and read-only kept both ways.
 */
#include "core.h"

#include <string.h>

/* Whether `t->shape` may be read for its `ndim` extents. The runtime validates every
 * field, but the shortcuts below read the shape before it is called: a producer's
 * NULL shape or wild ndim must reach the runtime's refusal, not crash them. */
int has_readable_shape(const DLTensor* t) {
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
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    /* Asked with the AttributeError put aside: CPython 3.13's PyObject_HasAttr reports
     * a pending exception as unraisable, on stderr for every non-array argument. */
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (PyObject_HasAttr(x, names.dlpack)) { /* __dlpack__ itself raised it */
      PyErr_Restore(type, value, traceback);
      return -1;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    /* A torch Module: its state_dict() is tensors (an optimizer's also holds numbers). */
    const int has_state = PyObject_HasAttrString(x, "state_dict") && PyObject_HasAttrString(x, "named_parameters");
    PyErr_Format(PyExc_TypeError,
                 "arraybridge: %s (a %s) is neither a DLPack capsule nor an object with __dlpack__: pass an array "
                 "(NumPy, CuPy, torch, JAX, TensorFlow, ...), an arraybridge Tensor or a DLPack capsule%s",
                 role, Py_TYPE(x)->tp_name, has_state ? ", or this one's .state_dict() (a structure of tensors)" : "");
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

/* Replaces the pending exception of a producer's failed export with the package's
 * DLPackError naming the argument, in one line, the producer's own kept as its
 * __cause__ (but torch's, a C++ backtrace). A torch tensor's every failure is a refusal
 * (sparse, quantized, meta, nested); another producer's only a BufferError, the array
 * API's word for "cannot export", or an error about DLPack (NumPy's big-endian or
 * datetime arrays, JAX's int4): a failed device, an interrupt or a MemoryError stays
 * what it is, as does an error that is already ours. */
static void refuse_export(PyObject* x, const char* role, ImportPurpose purpose, int every_failure) {
  if (!PyErr_ExceptionMatches(PyExc_Exception) || PyErr_ExceptionMatches(PyExc_MemoryError)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (traceback) PyException_SetTraceback(value, traceback);
  PyObject* text = value ? PyObject_Str(value) : NULL;
  const char* message = text ? PyUnicode_AsUTF8(text) : NULL;
  const int refused = message && strncmp(message, "arraybridge: ", 13) != 0 &&
      (every_failure || PyErr_GivenExceptionMatches(type, PyExc_BufferError) || strstr(message, "DLPack"));
  if (!refused) {  /* nothing to say better: kept as raised */
    PyErr_Clear(); /* a failed str() */
    Py_XDECREF(text);
    PyErr_Restore(type, value, traceback);
    return;
  }
  const char* end = strchr(message, '\n');
  PyObject* first = PyUnicode_FromStringAndSize(message, end ? end - message : (Py_ssize_t)strlen(message));
  const char* problem = purpose == IMPORT_DESTINATION ? "export into" : "export";
  PyObject* error = first ? PyObject_CallFunction(hooks.refusal, "OssO", x, role, problem, first) : NULL;
  if (error) {
    if (!every_failure) {                 /* torch's is a C++ backtrace: said in the first line alone */
      PyException_SetCause(error, value); /* takes the reference */
      value = NULL;
    }
    PyErr_SetObject((PyObject*)Py_TYPE(error), error);
    Py_DECREF(error);
  }
  Py_XDECREF(first);
  Py_DECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
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
  if (status > 0 && !((DLManagedTensorVersioned*)out->tensor)->dl_tensor.data &&
      tensor_bytes(&((DLManagedTensorVersioned*)out->tensor)->dl_tensor) != 0) {
    imported_delete(out);
    return torch_refuse_storageless(x, role);
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
  if (purpose == IMPORT_DESTINATION) out->written = x;
  /* A writable view of x's memory: a write into it is a write into x (keep_torch_twin). */
  PyObject* twin = immutable || resolved || purpose == IMPORT_DESTINATION ? NULL : x;
  if (status > 0 && !resolved) {
    out->torch_twin = twin;
    return keep_read_only(immutable, out);
  }
  if (status > 0) imported_delete(out); /* of the tensor whose bits were resolved */
  PyObject* source = resolved ? resolved : x;
  out->resolved = resolved != NULL;
  status = import_from_producer(source, role, immutable, out);
  if (status < 0) refuse_export(x, role, purpose, 1);
  out->torch_twin = twin;
  Py_XDECREF(resolved);
  return status;
}

/* The producer's tensor, owned by the caller: a view of a Tensor, a consumed
 * capsule, what its type's DLPack C exchange API exports, or what __dlpack__
 * returns. A producer whose own export could abort the process is vetted first, and
 * a PyTorch tensor's lazy bits and autograd are checked (import_torch). */
int import_source(PyObject* x, const char* role, ImportPurpose purpose, Imported* out) {
  out->after = NULL;
  out->torch_twin = NULL;
  out->written = NULL;
  out->viewed = NULL;
  out->pending_event = NULL;
  if (tensor_check(x)) {
    out->viewed = x;
    PyObject* twin = ((TensorObject*)x)->torch_twin;
    if (twin && purpose == IMPORT_DESTINATION && torch_may_write(twin, role) < 0) return -1;
    out->torch_twin = twin;
    out->written = purpose == IMPORT_DESTINATION ? twin : NULL;
    /* Held, not borrowed: asking it may run deleters that let go of the GIL, and another
     * thread may then give x another Event (tensors_hold), dropping this one. */
    PyObject* ready = tensor_tracked(x)->ready; /* a view's: the Tensor it views */
    Py_XINCREF(ready);
    abr_event* pending = NULL;
    PyObject* owner = x;
    if (ready && event_ready(ready) >= 0) { /* else its queued work failed: so does every use of it */
      pending = event_handle(ready);
      if (pending &&
          !out->keep_pending) { /* queued work (non_blocking) is waited for, unless the caller orders on it */
        pending = NULL;
        if (event_settle(ready) < 0) owner = NULL;
      }
      /* The view keeps x alive, and the Event `after` belongs to, as long as the call uses it. */
      if (owner && pending) owner = PyTuple_Pack(2, x, ready);
    } else if (ready) {
      owner = NULL;
    }
    Py_XDECREF(ready);
    if (!owner) return -1;
    out->after = pending;
    out->pending_event = pending ? ready : NULL; /* the owner tuple keeps it */
    out->tensor = new_owner_view(((TensorObject*)x)->tensor, owner, 0);
    if (owner != x) Py_DECREF(owner);
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
    if (!vetted) {
      refuse_export(x, role, purpose,
                    0); /* the export it asked for refused (torch's read-only wrapper of a conj view) */
      return -1;
    }
    const int status = PyCapsule_CheckExact(vetted) ? import_capsule(vetted, immutable, out)
                                                    : import_exported(vetted, role, immutable, out);
    if (status < 0) refuse_export(x, role, purpose, 0);
    Py_DECREF(vetted);
    return status;
  }
  if (traits & (PRODUCER_NDARRAY | PRODUCER_HOST_BUFFER)) {
    const int read = traits & PRODUCER_NDARRAY ? import_ndarray(x, out) : import_host_buffer(x, out);
    if (read != 0) return read < 0 ? -1 : keep_read_only(immutable, out);
  }
  if (traits & PRODUCER_TORCH) return import_torch(x, role, purpose, immutable, out);
  if (import_from_producer(x, role, immutable, out) == 0) return 0;
  refuse_export(x, role, purpose, 0);
  return -1;
}

PyObject* imports_viewed(const Imported* imports, Py_ssize_t count) {
  Py_ssize_t found = 0;
  for (Py_ssize_t i = 0; i < count; ++i) found += imports[i].viewed != NULL;
  PyObject* viewed = PyTuple_New(2 * found);
  for (Py_ssize_t i = 0, j = 0; viewed && i < count; ++i)
    if (imports[i].viewed) {
      PyObject* after = imports[i].pending_event ? imports[i].pending_event : Py_None;
      Py_INCREF(imports[i].viewed);
      PyTuple_SET_ITEM(viewed, j++, imports[i].viewed);
      Py_INCREF(after);
      PyTuple_SET_ITEM(viewed, j++, after);
    }
  return viewed;
}

/* abr_copy_many takes plain DLTensors, which carry no flags, and MPI writes behind the
 * runtime's back: a READ_ONLY destination (a read-only array, a legacy capsule, a JAX
 * or TensorFlow array, a Tensor viewing a torch tensor that requires grad) is refused
 * here, with copy's exception class and the destination's place, before anything
 * moves, in the words a single copy's refusal ends with (_transfer.py's _READ_ONLY_WHY). */
int refuse_read_only(const DLManagedTensorVersioned* dst, const char* context, const char* role) {
  if (!(dst->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) return 0;
  PyObject* like = PyObject_CallFunction(hooks.error, "isO", (int)ABR_ERR_READ_ONLY, context, Py_None);
  PyObject* name = like ? PyObject_GetAttrString(like, "status_name") : NULL;
  PyObject* refusal = name
      ? PyObject_CallFunction((PyObject*)Py_TYPE(like), "NiO",
                              PyUnicode_FromFormat("%s: %s is marked READ_ONLY%U", context, role, hooks.read_only_why),
                              (int)ABR_ERR_READ_ONLY, name)
      : NULL;
  if (refusal) PyErr_SetObject((PyObject*)Py_TYPE(refusal), refusal);
  Py_XDECREF(refusal);
  Py_XDECREF(name);
  Py_XDECREF(like);
  return -1;
}
