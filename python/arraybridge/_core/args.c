/* The fast-call argument parser, the interned names the entry points share, the
 * parsers of their arguments (device, copy, dtype, stream, flags), and the
 * restatement of an argument's error as the caller's call. */
#include <string.h>

#include "core.h"

_Static_assert(sizeof(long) >= 8, "device strings are cached as (type << 32 | id) in a long");

Names names;

/* Makes the names still missing: an import that failed part way (out of memory)
 * leaves some made, and the next import makes the rest. */
int names_init(void) {
  if (!names.dlpack) names.dlpack = PyUnicode_InternFromString("__dlpack__");
  if (!names.dlpack_slow) names.dlpack_slow = PyUnicode_InternFromString("_dlpack_slow");
  if (!names.max_version_key) {
    PyObject* key = PyUnicode_InternFromString("max_version");
    names.max_version_key = key ? PyTuple_Pack(1, key) : NULL;
    Py_XDECREF(key);
  }
  if (!names.max_version) names.max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  if (!names.debug_level) names.debug_level = PyLong_FromLong(10);
  if (!names.exchange_api) names.exchange_api = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  return names.dlpack && names.dlpack_slow && names.max_version_key && names.max_version && names.debug_level &&
          names.exchange_api
      ? 0
      : -1;
}

int parse_arguments(const char* function, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                    const char* const* texts, PyObject** interned, int count, int positional, int required,
                    PyObject** slots) {
  if (!interned[count - 1]) /* the last is made last: a first call that ran out of memory made only some */
    for (int i = 0; i < count; ++i)
      if (!interned[i] && !(interned[i] = PyUnicode_InternFromString(texts[i]))) return -1;
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

int unpack_pair(PyObject* pair, DLDevice* out) {
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
int parse_device(PyObject* device, DLDevice* out) {
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

int parse_copy(PyObject* copy, abr_copy_mode* out) {
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

/* 1 or 0 for True or False (NumPy's bool too), else -1 with a TypeError naming the
 * argument: None or "x" read by truth would guess (host_staging=None allowed staging). */
static int strict_truth(PyObject* value, const char* name, const char* choices) {
  if (value == Py_True) return 1;
  if (value == Py_False) return 0;
  const char* type = Py_TYPE(value)->tp_name;
  if (strcmp(type, "numpy.bool") == 0 || strcmp(type, "numpy.bool_") == 0) return PyObject_IsTrue(value);
  PyErr_Format(PyExc_TypeError, "arraybridge: %s must be %s, not %R", name, choices, value);
  return -1;
}

static int parse_flag(PyObject* value, const char* name, const char* choices, uint32_t flag, uint32_t* flags) {
  if (!value) return 0;
  int truth = strict_truth(value, name, choices);
  if (truth < 0) return -1;
  if (truth) *flags |= flag;
  return 0;
}

/* contiguous=: False, True (compact row-major) or "nonnegative" (no negative stride). */
int parse_contiguous(PyObject* value, uint32_t* flags) {
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
  return parse_flag(value, "contiguous", "True, False or \"nonnegative\"", ABR_TRANSFER_REQUIRE_CONTIGUOUS, flags);
}

int parse_host_staging(PyObject* host_staging, PyObject* strict, const char* call, uint32_t* flags) {
  if (strict) {
    if (host_staging) {
      PyErr_Format(PyExc_TypeError, "arraybridge: give host_staging= only (strict= is its old spelling)");
      return -1;
    }
    const int refuse = PyObject_IsTrue(strict);
    if (refuse < 0 ||
        PyErr_WarnFormat(PyExc_DeprecationWarning, 1, "%s(strict=%R) is %s(host_staging=%s) now", call, strict, call,
                         refuse ? "False" : "True") < 0)
      return -1;
    if (refuse) *flags |= ABR_TRANSFER_NO_HOST_STAGING;
    return 0;
  }
  const int allowed = host_staging ? strict_truth(host_staging, "host_staging", "True or False") : 1;
  if (allowed < 0) return -1;
  if (!allowed) *flags |= ABR_TRANSFER_NO_HOST_STAGING;
  return 0;
}

int parse_truth(PyObject* value, const char* name, int* out) {
  *out = value ? strict_truth(value, name, "True or False") : 0;
  return *out < 0 ? -1 : 0;
}

int parse_dtype(PyObject* dtype, DLDataType* out) {
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

int parse_casting(PyObject* casting, abr_casting* out) {
  static const struct {
    const char* name;
    abr_casting value;
  } kRules[] = {{"no", ABR_CASTING_NO},
                {"equiv", ABR_CASTING_NO},
                {"safe", ABR_CASTING_SAFE},
                {"same_kind", ABR_CASTING_SAME_KIND},
                {"unsafe", ABR_CASTING_UNSAFE}};
  if (!casting || casting == Py_None) return 0;
  for (size_t i = 0; PyUnicode_Check(casting) && i < sizeof kRules / sizeof kRules[0]; ++i)
    if (PyUnicode_CompareWithASCIIString(casting, kRules[i].name) == 0) {
      *out = kRules[i].value;
      return 0;
    }
  PyErr_Format(PyExc_ValueError,
               "arraybridge: casting must be None, \"no\", \"equiv\", \"safe\", \"same_kind\" or \"unsafe\" "
               "(NumPy's names), not %R",
               casting);
  return -1;
}

int parse_stream(PyObject* stream, uintptr_t* out) {
  if (!stream || stream == Py_None) return 0;
  PyObject* handle = PyObject_CallOneArg(hooks.stream_handle, stream);
  if (!handle) return -1;
  *out = (uintptr_t)PyLong_AsUnsignedLongLong(handle);
  Py_DECREF(handle);
  return PyErr_Occurred() ? -1 : 0;
}

/* A plain ValueError or TypeError the package raised as "arraybridge: <problem>"
 * while serving `call` is restated as "<call>: <problem>": the caller reads the
 * call it made, not the package's name. Exceptions of our own classes already
 * name the call; anything else passes unchanged. Always returns NULL. */
PyObject* restated(const char* call) {
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
