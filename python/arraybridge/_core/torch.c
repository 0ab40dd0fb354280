/* PyTorch tensors carry what DLPack cannot say, and torch's exchange table exports
 * their memory without checking it (its own __dlpack__ refuses them): a conjugate or
 * negative view's memory holds other values than the tensor shows (torch resolves
 * the bits on read), and a tensor that requires grad is autograd's to write. So a
 * torch tensor is vetted before it is exported: its bits resolved into a copy where a
 * copy is allowed, imported read-only when autograd owns it, refused otherwise; and
 * a failed export (sparse, quantized, meta, nested) is said in one line, without
 * torch's C++ backtrace. The refusals' words are the package's (torch_refusal). */
#include "core.h"

#include <string.h>

static PyObject *is_conj, *is_neg, *resolve_conj, *resolve_neg, *requires_grad;

static int names_ready(void) {
  if (requires_grad) return 0;
  is_conj = PyUnicode_InternFromString("is_conj");
  is_neg = PyUnicode_InternFromString("is_neg");
  resolve_conj = PyUnicode_InternFromString("resolve_conj");
  resolve_neg = PyUnicode_InternFromString("resolve_neg");
  requires_grad = PyUnicode_InternFromString("requires_grad");
  return is_conj && is_neg && resolve_conj && resolve_neg && requires_grad ? 0 : -1;
}

static int truth(PyObject* value) {
  if (!value) return -1;
  const int result = PyObject_IsTrue(value);
  Py_DECREF(value);
  return result;
}

/* Raises the package's exception for `problem` with a tensor in `role`. */
static int refuse(PyObject* x, const char* role, const char* problem, const char* detail) {
  PyObject* error = PyObject_CallFunction(hooks.torch_refusal, "Ossz", x, role, problem, detail);
  if (error) {
    PyErr_SetObject((PyObject*)Py_TYPE(error), error);
    Py_DECREF(error);
  }
  return -1;
}

int torch_vet(PyObject* x, const char* role, ImportPurpose purpose, PyObject** replacement, int* autograd) {
  *replacement = NULL;
  *autograd = 0;
  if (names_ready() < 0) return -1;
  const int conj = truth(PyObject_CallMethodNoArgs(x, is_conj));
  const int neg = conj < 0 ? -1 : truth(PyObject_CallMethodNoArgs(x, is_neg));
  const int grad = neg < 0 ? -1 : truth(PyObject_GetAttr(x, requires_grad));
  if (grad < 0) return -1;
  const char* bit = conj ? "conj" : neg ? "neg" : NULL;
  if (purpose == IMPORT_DESTINATION && (bit || grad)) return refuse(x, role, bit ? bit : "grad", "destination");
  if (bit) {
    if (purpose == IMPORT_NO_COPY) return refuse(x, role, bit, "no copy");
    PyObject* resolved = x;
    if (conj) resolved = PyObject_CallMethodNoArgs(x, resolve_conj);
    else Py_INCREF(x); /* Py_NewRef is 3.10+; the package supports 3.9 */
    if (resolved && neg) Py_SETREF(resolved, PyObject_CallMethodNoArgs(resolved, resolve_neg));
    if (!resolved) return -1;
    *replacement = resolved;
  }
  *autograd = grad;
  return 0;
}

void torch_refusal(PyObject* x, const char* role) {
  if (!PyErr_ExceptionMatches(PyExc_Exception) || PyErr_ExceptionMatches(PyExc_MemoryError)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject* text = value ? PyObject_Str(value) : NULL;
  const char* message = text ? PyUnicode_AsUTF8(text) : NULL;
  if (!message) {
    Py_XDECREF(text);
    PyErr_Restore(type, value, traceback); /* nothing to shorten: keep what was raised */
    return;
  }
  const char* end = strchr(message, '\n');
  PyObject* first = PyUnicode_FromStringAndSize(message, end ? end - message : (Py_ssize_t)strlen(message));
  if (first) refuse(x, role, "export", PyUnicode_AsUTF8(first));
  Py_XDECREF(first);
  Py_DECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
}
