/* PyTorch tensors carry what DLPack cannot say, and torch's exchange table exports
 * their memory without checking it (its own __dlpack__ refuses them): a conjugate or
 * negative view's memory holds other values than the tensor shows (torch resolves
 * the bits on read), and a tensor that requires grad is autograd's to write. So a
 * torch tensor is vetted before its export is used (transfer.c's import_torch): its
 * bits resolved into a copy where a copy is allowed, imported read-only when
 * autograd owns it, refused otherwise; a destination's version counter is bumped, as
 * torch's in-place ops bump it (an inference tensor, which has none, is refused
 * outside inference mode, as torch refuses it); a Tensor that views a torch tensor
 * writable keeps it (its torch twin), and its writes bump it too; and a failed
 * export (sparse, quantized, meta, nested) is said in one line, without torch's C++
 * backtrace. The refusals' words are the package's (_producers.refusal). */
#include "core.h"

#include <string.h>

static PyObject *is_conj, *is_neg, *resolve_conj, *resolve_neg, *requires_grad;

static int intern(PyObject** slot, const char* text) {
  if (!*slot) *slot = PyUnicode_InternFromString(text);
  return *slot ? 0 : -1;
}

static int names_ready(void) {
  return intern(&is_conj, "is_conj") < 0 || intern(&is_neg, "is_neg") < 0 ||
          intern(&resolve_conj, "resolve_conj") < 0 || intern(&resolve_neg, "resolve_neg") < 0 ||
          intern(&requires_grad, "requires_grad") < 0
      ? -1
      : 0;
}

/* The three checks as the last torch type defines them (its methods and the
 * requires_grad descriptor), looked up once: called through the type they cost a
 * third of a lookup on each tensor. */
static PyTypeObject* checked_type;
static PyObject *type_is_conj, *type_is_neg, *type_requires_grad;

static int checks_for(PyTypeObject* type) {
  if (type == checked_type) return 0;
  PyObject* conj = PyObject_GetAttr((PyObject*)type, is_conj);
  PyObject* neg = conj ? PyObject_GetAttr((PyObject*)type, is_neg) : NULL;
  PyObject* grad = neg ? PyObject_GetAttr((PyObject*)type, requires_grad) : NULL;
  if (!grad || !Py_TYPE(grad)->tp_descr_get) {
    Py_XDECREF(conj);
    Py_XDECREF(neg);
    Py_XDECREF(grad);
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "arraybridge: %s.requires_grad is no descriptor", type->tp_name);
    return -1;
  }
  Py_XSETREF(type_is_conj, conj);
  Py_XSETREF(type_is_neg, neg);
  Py_XSETREF(type_requires_grad, grad);
  Py_INCREF(type);
  Py_XSETREF(checked_type, type);
  return 0;
}

static int truth(PyObject* value) {
  if (!value) return -1;
  const int result = PyObject_IsTrue(value);
  Py_DECREF(value);
  return result;
}

/* Raises the package's exception for `problem` with a tensor in `role`. */
static int refuse(PyObject* x, const char* role, const char* problem, const char* detail) {
  PyObject* error = PyObject_CallFunction(hooks.refusal, "Ossz", x, role, problem, detail);
  if (error) {
    PyErr_SetObject((PyObject*)Py_TYPE(error), error);
    Py_DECREF(error);
  }
  return -1;
}

/* torch._C._increment_version (what torch.autograd.graph.increment_version calls,
 * without its Python wrapper: that cost as much as the inference check below) and
 * torch.is_inference_mode_enabled, looked up once. */
static PyObject *increment_version, *inference_mode_enabled, *is_inference;
static int bump_takes_tensor = -1; /* an older torch's takes one tensor, a newer one's a sequence: found on first use */

static int written_ready(void) {
  if (increment_version) return 0;
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* c = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
  PyObject* bump = c ? PyObject_GetAttrString(c, "_increment_version") : NULL;
  PyObject* enabled = bump ? PyObject_GetAttrString(torch, "is_inference_mode_enabled") : NULL;
  Py_XDECREF(torch);
  Py_XDECREF(c);
  if (!enabled || intern(&is_inference, "is_inference") < 0) { /* a torch without them: the write is refused */
    Py_XDECREF(bump);
    Py_XDECREF(enabled);
    return -1;
  }
  inference_mode_enabled = enabled;
  increment_version = bump;
  return 0;
}

static int call_bump(PyObject* x, int one_tensor) {
  PyObject* arg = one_tensor ? (Py_INCREF(x), x) : PyTuple_Pack(1, x);
  PyObject* done = arg ? PyObject_CallOneArg(increment_version, arg) : NULL;
  Py_XDECREF(arg);
  Py_XDECREF(done);
  return done ? 0 : -1;
}

/* A sequence first; a TypeError on the first call tries one tensor, and the form that
 * worked is kept (a later failure raises: the write is done, but not hidden). */
static int bump_version(PyObject* x) {
  if (bump_takes_tensor >= 0) return call_bump(x, bump_takes_tensor);
  if (call_bump(x, 0) == 0) {
    bump_takes_tensor = 0;
    return 0;
  }
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
  PyErr_Clear();
  if (call_bump(x, 1) < 0) return -1;
  bump_takes_tensor = 1;
  return 0;
}

/* Whether torch lets x (the write's `role`) be written in place: a tensor made under
 * inference_mode has no version counter, and torch refuses to update it in place
 * outside inference mode: so do we, before anything moves. */
int torch_may_write(PyObject* x, const char* role) {
  if (written_ready() < 0) return -1;
  const int inference = truth(PyObject_CallMethodNoArgs(x, is_inference));
  if (inference < 0) return -1;
  if (!inference) return 0;
  const int inside = truth(PyObject_CallNoArgs(inference_mode_enabled));
  return inside < 0 ? -1 : inside ? 0 : refuse(x, role, "inference", "destination");
}

/* Statuses a copy returns before it writes anything (arraybridge.h says so): the
 * transfer refusals, the DLPack descriptor errors, and what the call cannot do
 * (ABR_ERR_UNSUPPORTED: the planner refuses it, a device kernel's limits included). */
static int refused_before_writing(abr_status status) {
  switch (status) {
    case ABR_ERR_UNSUPPORTED:
    case ABR_ERR_COPY_REQUIRED:
    case ABR_ERR_READ_ONLY:
    case ABR_ERR_SHAPE_MISMATCH:
    case ABR_ERR_CASTING:
    case ABR_ERR_DLPACK_VERSION:
    case ABR_ERR_DLPACK_NDIM:
    case ABR_ERR_DLPACK_SHAPE:
    case ABR_ERR_DLPACK_STRIDES:
    case ABR_ERR_DLPACK_OVERFLOW:
    case ABR_ERR_DLPACK_DATA:
    case ABR_ERR_DLPACK_DTYPE:
    case ABR_ERR_DLPACK_DEVICE:
    case ABR_ERR_DLPACK_FLAGS: return 1;
    default: return 0;
  }
}

/* Tells autograd that the destinations were written behind torch's back, as torch's
 * own in-place ops do: each one's version counter (shared with its views) goes up,
 * so a backward pass that saved it raises torch's own error instead of computing
 * from the new values. After the call, not at import: a copy refused before anything
 * moved (refused_before_writing, or an import that failed) changed nothing, and a
 * backward pass that saved the tensor still runs. A call that failed part way may
 * have written, so it bumps too; a queued copy (non_blocking) bumps once queued.
 * Every destination is bumped even when one bump fails, and the first failure raised. */
int torch_tell_written(const Imported* destinations, Py_ssize_t n, abr_status status) {
  if (refused_before_writing(status)) return 0;
  PyObject *type = NULL, *value = NULL, *traceback = NULL;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = destinations[i].written;
    if (!x || (written_ready() == 0 && bump_version(x) == 0)) continue;
    if (!type)
      PyErr_Fetch(&type, &value, &traceback);
    else
      PyErr_Clear();
  }
  if (!type) return 0;
  PyErr_Restore(type, value, traceback);
  return -1;
}

int torch_vet(PyObject* x, const char* role, ImportPurpose purpose, int may_be_conjugate, PyObject** replacement,
              int* autograd) {
  *replacement = NULL;
  *autograd = 0;
  if (names_ready() < 0 || checks_for(Py_TYPE(x)) < 0) return -1;
  /* Our own references: the calls below may run Python, and another thread may then
   * cache another type's checks. */
  PyObject *check_conj = type_is_conj, *check_neg = type_is_neg, *check_grad = type_requires_grad;
  Py_INCREF(check_conj);
  Py_INCREF(check_neg);
  Py_INCREF(check_grad);
  const int conj = may_be_conjugate ? truth(PyObject_CallOneArg(check_conj, x)) : 0;
  const int neg = conj < 0 ? -1 : truth(PyObject_CallOneArg(check_neg, x));
  const int grad = neg < 0 ? -1 : truth(Py_TYPE(check_grad)->tp_descr_get(check_grad, x, (PyObject*)Py_TYPE(x)));
  Py_DECREF(check_conj);
  Py_DECREF(check_neg);
  Py_DECREF(check_grad);
  if (grad < 0) return -1;
  const char* bit = conj ? "conj" : neg ? "neg" : NULL;
  if (purpose == IMPORT_DESTINATION) {
    if (bit || grad) return refuse(x, role, bit ? bit : "grad", "destination");
    return torch_may_write(x, role);
  }
  if (bit) {
    if (purpose == IMPORT_NO_COPY || purpose == IMPORT_SHARED)
      return refuse(x, role, bit, purpose == IMPORT_SHARED ? "shared" : "no copy");
    PyObject* resolved = x;
    if (conj)
      resolved = PyObject_CallMethodNoArgs(x, resolve_conj);
    else
      Py_INCREF(x);
    if (resolved && neg) Py_SETREF(resolved, PyObject_CallMethodNoArgs(resolved, resolve_neg));
    if (!resolved) return -1;
    *replacement = resolved;
  }
  *autograd = grad;
  return 0;
}

void keep_torch_twin(PyObject* tensor, const Imported* src) {
  TensorObject* t = (TensorObject*)tensor;
  const int is_view = t->report.path == ABR_PATH_ZERO_COPY || t->report.path == ABR_PATH_HOST_WRAP;
  if (!src->torch_twin || !is_view || (t->tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) return;
  Py_INCREF(src->torch_twin);
  Py_XSETREF(t->torch_twin, src->torch_twin);
}

int torch_refuse_storageless(PyObject* x, const char* role) { return refuse(x, role, "storageless", NULL); }
