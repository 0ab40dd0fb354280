/* The Python callables the package registers once with _core.setup(), and the
 * exceptions they make for failed runtime calls. */
#include "core.h"

Hooks hooks;

/* kwargs[name] (borrowed), or NULL: missing when no error is set. */
static PyObject* keyword(PyObject* kwargs, const char* name) {
  PyObject* key = PyUnicode_FromString(name);
  PyObject* value = key ? PyDict_GetItemWithError(kwargs, key) : NULL;
  Py_XDECREF(key);
  return value;
}

/* setup(**hooks): called once by the package when its Python half is ready. Every
 * hook, the flags and the logger's cache are found before any is set, and
 * tensor_type (what hooks_ready checks) last: a setup that fails part way, running
 * out of memory included, leaves the module as it was. */
PyObject* core_setup(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  if (PyTuple_GET_SIZE(args) || !kwargs) {
    PyErr_SetString(PyExc_TypeError, "setup() takes the hooks as keywords");
    return NULL;
  }
  static const struct {
    const char* name;
    PyObject** slot;
  } kHooks[] = {{"parse_device", &hooks.parse_device},
                {"parse_dtype", &hooks.parse_dtype},
                {"stream_handle", &hooks.stream_handle},
                {"producer_strides", &hooks.producer_strides},
                {"error", &hooks.error},
                {"log_transfer", &hooks.log_transfer},
                {"producer_traits", &hooks.producer_traits},
                {"vet_producer", &hooks.vet_producer},
                {"refusal", &hooks.refusal},
                {"to_device_structure", &hooks.to_device_structure},
                {"copy_structure", &hooks.copy_structure},
                {"read_only_why", &hooks.read_only_why},
                {"tensor_type", &hooks.tensor_type}}; /* last: what hooks_ready checks */
  enum { kCount = sizeof kHooks / sizeof kHooks[0] };
  PyObject* found[kCount];
  for (int i = 0; i < kCount; ++i) {
    if (!(found[i] = keyword(kwargs, kHooks[i].name))) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "setup() needs %s", kHooks[i].name);
      return NULL;
    }
  }
  PyObject* tensor_type = found[kCount - 1];
  if (!PyType_Check(tensor_type) || !PyType_IsSubtype((PyTypeObject*)tensor_type, &TensorBaseType)) {
    PyErr_SetString(PyExc_TypeError, "setup(): tensor_type must subclass _core.TensorBase");
    return NULL;
  }
  for (int i = 0; i < kCount; ++i) { /* said in messages as it is: a str (found by its slot: no allocation) */
    if (kHooks[i].slot == &hooks.read_only_why && !PyUnicode_Check(found[i])) {
      PyErr_SetString(PyExc_TypeError, "setup(): read_only_why must be a str");
      return NULL;
    }
  }
  PyObject* flags = keyword(kwargs, "runtime_flags");
  const uint32_t runtime_flags = flags ? (uint32_t)PyLong_AsUnsignedLong(flags) : 0;
  if (PyErr_Occurred()) return NULL;
  /* The logger's level cache (CPython's Logger._cache), read to skip the log hook;
   * a logger without one only costs a call of the hook per transfer. */
  PyObject* logger = keyword(kwargs, "logger");
  PyObject* log_cache = logger ? PyObject_GetAttrString(logger, "_cache") : NULL;
  if (!log_cache && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear();
  }
  if (log_cache && !PyDict_Check(log_cache)) Py_CLEAR(log_cache);
  hooks.runtime_flags = runtime_flags;
  Py_XSETREF(hooks.log_cache, log_cache);
  for (int i = 0; i < kCount; ++i) {
    Py_INCREF(found[i]);
    Py_XSETREF(*kHooks[i].slot, found[i]);
  }
  Py_RETURN_NONE;
}

void raise_status(abr_status status, const char* context, const DLDevice* dst) {
  PyObject* where =
      dst ? Py_BuildValue("(ii)", (int)dst->device_type, (int)dst->device_id) : (Py_INCREF(Py_None), Py_None);
  PyObject* error = where ? PyObject_CallFunction(hooks.error, "isO", (int)status, context, where) : NULL;
  Py_XDECREF(where);
  if (error) {
    PyErr_SetObject((PyObject*)Py_TYPE(error), error);
    Py_DECREF(error);
  }
}

int hooks_ready(void) {
  if (hooks.tensor_type) return 0;
  PyErr_SetString(PyExc_RuntimeError, "arraybridge._core is used through the arraybridge package: import arraybridge");
  return -1;
}
