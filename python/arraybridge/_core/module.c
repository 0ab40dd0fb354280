/* The arraybridge._core module: its functions, the hooks the package registers,
 * and the argument parser the fast-call entry points share. */
#include "core.h"

Hooks hooks;
Names names;

int parse_arguments(const char* function, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                    const char* const* texts, PyObject** interned, int count, int positional, int required,
                    PyObject** slots) {
  if (!interned[0])
    for (int i = 0; i < count; ++i)
      if (!(interned[i] = PyUnicode_InternFromString(texts[i]))) return -1;
  for (int i = 0; i < count; ++i) slots[i] = NULL;
  if (nargs > positional) {
    PyErr_Format(PyExc_TypeError, "%s() takes %d positional argument%s but %zd were given", function, positional,
                 positional == 1 ? "" : "s", nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) slots[i] = args[i];
  const Py_ssize_t keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int found = -1;
    for (int i = 0; i < count && found < 0; ++i)
      if (key == interned[i]) found = i; /* callers' keywords are interned: usually one compare */
    for (int i = 0; i < count && found < 0; ++i)
      if (PyUnicode_Compare(key, interned[i]) == 0) found = i;
    if (found < 0) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'", function, key);
      return -1;
    }
    if (slots[found]) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", function, texts[found]);
      return -1;
    }
    slots[found] = args[nargs + k];
  }
  for (int i = 0; i < required; ++i)
    if (!slots[i]) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", function, texts[i]);
      return -1;
    }
  return 0;
}

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
static PyObject* setup(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  if (PyTuple_GET_SIZE(args) || !kwargs) {
    PyErr_SetString(PyExc_TypeError, "setup() takes the hooks as keywords");
    return NULL;
  }
  if (take_hook(kwargs, "tensor_type", &hooks.tensor_type) < 0 || take_hook(kwargs, "runtime", &hooks.runtime) < 0 ||
      take_hook(kwargs, "parse_device", &hooks.parse_device) < 0 ||
      take_hook(kwargs, "parse_dtype", &hooks.parse_dtype) < 0 ||
      take_hook(kwargs, "stream_handle", &hooks.stream_handle) < 0 ||
      take_hook(kwargs, "producer_strides", &hooks.producer_strides) < 0 || take_hook(kwargs, "error", &hooks.error) < 0 ||
      take_hook(kwargs, "log_transfer", &hooks.log_transfer) < 0)
    return NULL;
  if (!PyType_Check(hooks.tensor_type) ||
      !PyType_IsSubtype((PyTypeObject*)hooks.tensor_type, &TensorBaseType)) {
    PyErr_SetString(PyExc_TypeError, "setup(): tensor_type must subclass _core.TensorBase");
    return NULL;
  }
  /* The logger's level cache (CPython's Logger._cache), read to skip the log hook. */
  PyObject* logger = PyDict_GetItemString(kwargs, "logger");
  Py_CLEAR(hooks.log_cache);
  if (logger) {
    PyObject* cache = PyObject_GetAttrString(logger, "_cache");
    if (cache && PyDict_Check(cache)) hooks.log_cache = cache;
    else Py_XDECREF(cache);
    PyErr_Clear();
  }
  Py_RETURN_NONE;
}

/* export(tensor, versioned, copied) -> a capsule viewing a Tensor, for Tensor._dlpack_slow. */
static PyObject* export(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 3 || !tensor_check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "export(tensor, versioned, copied)");
    return NULL;
  }
  int versioned = PyObject_IsTrue(args[1]), copied = PyObject_IsTrue(args[2]);
  if (versioned < 0 || copied < 0) return NULL;
  return export_capsule(((TensorObject*)args[0])->tensor, args[0], versioned, copied);
}

static PyMethodDef methods[] = {
    {"to_device", (PyCFunction)(void (*)(void))core_to_device, METH_FASTCALL | METH_KEYWORDS, core_to_device_doc},
    {"from_dlpack", (PyCFunction)(void (*)(void))core_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     core_from_dlpack_doc},
    {"copy", (PyCFunction)(void (*)(void))core_copy, METH_FASTCALL | METH_KEYWORDS, core_copy_doc},
    {"transfer", (PyCFunction)(void (*)(void))core_transfer, METH_FASTCALL,
     "transfer(x, dst, copy, context) -> Tensor on the (type, id) pair dst; errors name context"},
    {"export", (PyCFunction)(void (*)(void))export, METH_FASTCALL,
     "export(tensor, versioned, copied) -> a DLPack capsule viewing tensor and keeping it alive"},
    {"capsule_name", capsule_name, METH_O, "capsule_name(capsule) -> its name"},
    {"untracked_type", untracked_type, METH_O,
     "untracked_type(cls) -> cls rebuilt as the final type arraybridge.Tensor, whose instances the cycle collector "
     "does not track (a class decorator)"},
    {"setup", (PyCFunction)(void (*)(void))setup, METH_VARARGS | METH_KEYWORDS,
     "setup(tensor_type=, runtime=, parse_device=, parse_dtype=, stream_handle=, producer_strides=, error=, "
     "log_transfer=, logger=)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "arraybridge._core",
                                        "The hot path of arraybridge in C: transfers, Tensor, DLPack capsules", -1,
                                        methods};

PyMODINIT_FUNC PyInit__core(void) {
  if (PyType_Ready(&TensorBaseType) < 0) return NULL;
  if (!names.dlpack) {
    names.dlpack = PyUnicode_InternFromString("__dlpack__");
    names.dlpack_slow = PyUnicode_InternFromString("_dlpack_slow");
    PyObject* key = PyUnicode_InternFromString("max_version");
    names.max_version_key = key ? PyTuple_Pack(1, key) : NULL;
    Py_XDECREF(key);
    names.max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
    names.debug_level = PyLong_FromLong(10);
    if (!names.dlpack || !names.dlpack_slow || !names.max_version_key || !names.max_version || !names.debug_level)
      return NULL;
  }
  PyObject* module = PyModule_Create(&module_def);
  if (!module) return NULL;
  Py_INCREF(&TensorBaseType);
  if (PyModule_AddObject(module, "TensorBase", (PyObject*)&TensorBaseType) < 0) {
    Py_DECREF(&TensorBaseType);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
