/*
 * arraybridge.Event: the completion of work queued without waiting (to_device and
 * copy with non_blocking=True). It owns an abr_event; a Tensor made that way holds
 * one until its data is known to be there.
 */
#include "core.h"

#include <stddef.h>

typedef struct {
  PyObject_HEAD abr_event* event; /* owned */
  int done;                       /* waited for, or seen complete: never asked again */
  PyObject* keep;                 /* what the queued work reads or writes and nothing else keeps alive, or NULL */
  /* How to raise the work's failure again on every later ask: (class, args, attributes)
   * of the exception first raised, never that exception itself (the traceback it gets
   * as it goes up holds the caller's frame, whose locals hold the Tensor that holds
   * this Event: a cycle through objects the collector does not track). Or NULL. */
  PyObject* failure;
  int told_elsewhere; /* a Tensor's copy of a copy's completion: the caller's Event tells its failure */
  int forked_away;    /* made before this process forked: the parent's work, which nothing here can wait for */
  PyObject* weakrefs; /* a caller may keep its pending work in a WeakSet */
} EventObject;

static int settle(EventObject* self);

static void event_dealloc(EventObject* self) {
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject*)self);
  if (self->keep) { /* the work must be done before what it uses may go */
    if (settle(self) < 0) event_quiet((PyObject*)self) ? PyErr_Clear() : PyErr_WriteUnraisable((PyObject*)self);
    Py_CLEAR(self->keep);
  }
  Py_CLEAR(self->failure);
  abr_event_destroy(self->event); /* never waits */
  Py_TYPE(self)->tp_free((PyObject*)self);
}

PyObject* event_new(abr_event* event, PyObject* keep) {
  EventObject* self = PyObject_New(EventObject, &EventType);
  if (!self) return NULL;
  self->event = event;
  self->done = 0;
  Py_XINCREF(keep);
  self->keep = keep;
  self->failure = NULL;
  self->told_elsewhere = 0;
  self->forked_away = 0;
  self->weakrefs = NULL;
  return (PyObject*)self;
}

/* Raises the work's failure again: a new exception of the first one's class, args and
 * attributes (an ArrayBridgeError's status), with a traceback of its own. */
static int raise_failure(EventObject* self) {
  PyObject* cls = PyTuple_GET_ITEM(self->failure, 0);
  PyObject* made = PyObject_Call(cls, PyTuple_GET_ITEM(self->failure, 1), NULL);
  PyObject* attributes = made ? PyDict_Copy(PyTuple_GET_ITEM(self->failure, 2)) : NULL;
  if (attributes && PyObject_SetAttrString(made, "__dict__", attributes) == 0) PyErr_SetObject(cls, made);
  Py_XDECREF(attributes);
  Py_XDECREF(made);
  return -1; /* with the failure, or with what making it raised */
}

/* The recipe raise_failure makes `value` again from; NULL (nothing set) when it has none. */
static PyObject* failure_recipe(PyObject* value) {
  PyObject* args = PyObject_GetAttrString(value, "args");
  PyObject* attributes = args ? PyObject_GetAttrString(value, "__dict__") : NULL;
  PyObject* copied = attributes ? PyDict_Copy(attributes) : NULL;
  PyObject* recipe = copied ? PyTuple_Pack(3, (PyObject*)Py_TYPE(value), args, copied) : NULL;
  Py_XDECREF(copied);
  Py_XDECREF(attributes);
  Py_XDECREF(args);
  if (!recipe) PyErr_Clear();
  return recipe;
}

/* The work is over: `status` ABR_OK, or its failure, kept and raised (-1). */
static int finish(EventObject* self, abr_status status) {
  if (status != ABR_OK && self->failure) return raise_failure(self); /* another thread kept it first */
  if (status != ABR_OK) {
    self->forked_away = status == ABR_ERR_BACKEND_UNAVAILABLE; /* the only way an event's wait is refused */
    raise_status(status, self->forked_away ? "cannot wait here for queued work" : "queued work failed", NULL);
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    /* A plain MemoryError is the hook's own memory running out, not the work's failure
     * (an OutOfMemoryError is): nothing is kept and the next ask asks the runtime again. */
    if (value && Py_TYPE(value) != (PyTypeObject*)PyExc_MemoryError) self->failure = failure_recipe(value);
    PyErr_Restore(type, value, traceback);
    if (!self->failure) return -1;
  }
  self->done = 1; /* failed or not, nothing of the work runs any more */
  Py_CLEAR(self->keep);
  core_drain(); /* sources the runtime let go of once the work was done */
  return status == ABR_OK ? 0 : -1;
}

static int settle(EventObject* self) {
  if (self->failure) return raise_failure(self);
  if (self->done) return 0;
  abr_status status;
  Py_BEGIN_ALLOW_THREADS
  status = abr_event_synchronize(self->event);
  Py_END_ALLOW_THREADS
  return finish(self, status);
}

/* Both hold the Event while they ask: callers borrow it from a Tensor's `ready`, which
 * another thread may replace (tensors_hold) while the GIL is let go, here or in the
 * deleters finish() runs; its last reference gone, the abr_event waited on was
 * destroyed under the wait (PoCL: "pocl_refcount > 0" failed). */
int event_settle(PyObject* event) {
  Py_INCREF(event);
  const int settled = settle((EventObject*)event);
  Py_DECREF(event);
  return settled;
}

int event_ready(PyObject* event) {
  EventObject* self = (EventObject*)event;
  if (self->failure) return raise_failure(self);
  if (self->done) return 1;
  const abr_status status = abr_event_query(self->event); /* a failure once the work failed, never OK */
  if (status == ABR_NOT_READY) return 0;
  Py_INCREF(event);
  const int finished = finish(self, status) < 0 ? -1 : 1;
  Py_DECREF(event);
  return finished;
}

int event_failed(PyObject* event) {
  return ((EventObject*)event)->failure != NULL || ((EventObject*)event)->told_elsewhere;
}

int event_quiet(PyObject* event) { return ((EventObject*)event)->forked_away; }

abr_event* event_handle(PyObject* event) { return ((EventObject*)event)->done ? NULL : ((EventObject*)event)->event; }

typedef struct {
  Py_ssize_t count;
  DLManagedTensorVersioned* views[]; /* borrowed views the queued work uses; NULL entries allowed */
} Kept;

static void release_kept(PyObject* capsule) {
  Kept* kept = (Kept*)PyCapsule_GetPointer(capsule, "arraybridge.kept");
  if (!kept) return;
  for (Py_ssize_t i = 0; i < kept->count; ++i)
    if (kept->views[i] && kept->views[i]->deleter) kept->views[i]->deleter(kept->views[i]);
  PyMem_Free(kept);
  core_drain();
}

int any_tensor(PyObject* const* pairs, Py_ssize_t count) {
  for (Py_ssize_t i = 0; i < count; ++i)
    if (pairs[2 * i] && tensor_check(pairs[2 * i])) return 1;
  return 0;
}

int hold_for_tensors(abr_event* done, const char* context, PyObject** out) {
  if (hold_completion(done, NULL, context, out) < 0) return -1;
  if (*out) ((EventObject*)*out)->told_elsewhere = 1;
  return 0;
}

/* 0 once the Tensor's queued work is what the call was ordered after (`seen`), done,
 * or the call's own; work another call queued on it meanwhile (another thread, or a
 * producer's __dlpack__ while this call imported) is waited for: nothing orders it
 * before this call's, and replacing its Event would forget it. -1 when that work
 * failed: its Event stays, so that every reader raises the failure (this call's
 * work, left off the Tensor, is then not waited for by them). -1 too when the wait
 * itself could not be made (its memory ran out): this call's work is waited for
 * instead, so that the Event the Tensor keeps stands for both. */
static int caught_up(TensorObject* tensor, PyObject* seen, PyObject* event) {
  PyObject* ready;
  while ((ready = tensor->ready) && ready != seen && ready != event && event_handle(ready))
    if (event_settle(ready) < 0) {
      PyErr_Clear();
      if (!((EventObject*)ready)->failure && event_settle(event) < 0) PyErr_Clear();
      return -1;
    }
  return ready && ready != event && ((EventObject*)ready)->failure ? -1 : 0;
}

void tensors_hold(PyObject* const* pairs, Py_ssize_t count, PyObject* event) {
  for (Py_ssize_t i = 0; event && i < count; ++i) {
    PyObject* x = pairs[2 * i];
    if (!x || !tensor_check(x)) continue;
    TensorObject* tracked = tensor_tracked(x); /* a view's: the Tensor it views */
    PyObject* seen = pairs[2 * i + 1] == Py_None ? NULL : pairs[2 * i + 1];
    if (caught_up(tracked, seen, event) < 0) continue;
    Py_INCREF(event); /* the work it had queued before was waited for, or ordered first */
    Py_XSETREF(tracked->ready, event);
  }
}

PyObject* keep_many(DLManagedTensorVersioned* const* views, Py_ssize_t count) {
  Kept* kept = (Kept*)PyMem_Malloc(sizeof *kept + (size_t)count * sizeof kept->views[0]);
  if (!kept) return PyErr_NoMemory();
  kept->count = count;
  for (Py_ssize_t i = 0; i < count; ++i) kept->views[i] = views[i];
  PyObject* capsule = PyCapsule_New(kept, "arraybridge.kept", release_kept);
  if (!capsule) PyMem_Free(kept);
  return capsule;
}

PyObject* keep_views(DLManagedTensorVersioned* first, DLManagedTensorVersioned* second) {
  DLManagedTensorVersioned* const both[2] = {first, second};
  return keep_many(both, 2);
}

static PyObject* event_wait(EventObject* self, PyObject* unused) {
  (void)unused;
  if (event_settle((PyObject*)self) < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject* event_is_ready(EventObject* self, PyObject* unused) {
  (void)unused;
  const int ready = event_ready((PyObject*)self);
  if (ready < 0) return NULL;
  return PyBool_FromLong(ready);
}

static PyObject* event_repr(EventObject* self) {
  return PyUnicode_FromString(self->done ? "arraybridge.Event(done)" : "arraybridge.Event(queued)");
}

static PyMethodDef event_methods[] = {
    {"wait", (PyCFunction)event_wait, METH_NOARGS,
     "wait() -> None: blocks until the work is done (raises if it failed)"},
    {"is_ready", (PyCFunction)event_is_ready, METH_NOARGS,
     "is_ready() -> whether the work is done; never blocks (raises if it failed)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject EventType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "arraybridge.Event",
    .tp_basicsize = sizeof(EventObject),
    .tp_weaklistoffset = offsetof(EventObject, weakrefs),
    .tp_dealloc = (destructor)event_dealloc,
    .tp_repr = (reprfunc)event_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "The completion of work queued with non_blocking=True: wait() blocks until it is done, is_ready() "
        "asks without blocking; both raise the work's failure, every time they are asked. Made by "
        "arraybridge.copy(..., non_blocking=True) and held by the Tensors "
        "to_device(..., non_blocking=True) returns.",
    .tp_methods = event_methods,
};
