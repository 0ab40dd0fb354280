/* The fast-call argument parser and the interned names the entry points share. */
#include "core.h"

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
