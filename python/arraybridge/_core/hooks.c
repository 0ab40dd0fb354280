/* The Python callables the package registers once with _core.setup(), and the
 * exceptions they make for failed runtime calls. */
#include "core.h"

Hooks hooks;

static int take_hook(PyObject* kwargs, const char* name, PyObject** slot) {
  PyObject* value = PyDict_GetItemString(kwargs, name);
  if (!value) {
    PyErr_Format(PyExc_TypeError, "setup() needs %s", name);
    return -1;
  }
  Py_INCREF(value);
  Py_XSETREF(*slot, value);
  return 0;
}

/* setup(**hooks): called once by the package when its Python half is ready. */
PyObject* core_setup(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  if (PyTuple_GET_SIZE(args) || !kwargs) {
    PyErr_SetString(PyExc_TypeError, "setup() takes the hooks as keywords");
    return NULL;
  }
  if (take_hook(kwargs, "tensor_type", &hooks.tensor_type) < 0 ||
      take_hook(kwargs, "parse_device", &hooks.parse_device) < 0 ||
      take_hook(kwargs, "parse_dtype", &hooks.parse_dtype) < 0 ||
      take_hook(kwargs, "stream_handle", &hooks.stream_handle) < 0 ||
      take_hook(kwargs, "producer_strides", &hooks.producer_strides) < 0 ||
      take_hook(kwargs, "error", &hooks.error) < 0 || take_hook(kwargs, "log_transfer", &hooks.log_transfer) < 0 ||
      take_hook(kwargs, "producer_traits", &hooks.producer_traits) < 0 ||
      take_hook(kwargs, "vet_producer", &hooks.vet_producer) < 0 ||
      take_hook(kwargs, "torch_refusal", &hooks.torch_refusal) < 0 ||
      take_hook(kwargs, "to_device_structure", &hooks.to_device_structure) < 0 ||
      take_hook(kwargs, "copy_structure", &hooks.copy_structure) < 0)
    return NULL;
  PyObject* flags = PyDict_GetItemString(kwargs, "runtime_flags");
  hooks.runtime_flags = flags ? (uint32_t)PyLong_AsUnsignedLong(flags) : 0;
  if (PyErr_Occurred()) return NULL;
  if (!PyType_Check(hooks.tensor_type) || !PyType_IsSubtype((PyTypeObject*)hooks.tensor_type, &TensorBaseType)) {
    PyErr_SetString(PyExc_TypeError, "setup(): tensor_type must subclass _core.TensorBase");
    return NULL;
  }
  /* The logger's level cache (CPython's Logger._cache), read to skip the log hook. */
  PyObject* logger = PyDict_GetItemString(kwargs, "logger");
  Py_CLEAR(hooks.log_cache);
  if (logger) {
    PyObject* cache = PyObject_GetAttrString(logger, "_cache");
    if (cache && PyDict_Check(cache))
      hooks.log_cache = cache;
    else
      Py_XDECREF(cache);
    PyErr_Clear();
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
