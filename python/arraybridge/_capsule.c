/*
 * arraybridge._capsule: the part of the Python binding that must touch Python
 * objects from C, which cffi cannot express: DLPack capsules (made with a C
 * destructor, consumed by renaming) and the views that keep a Python owner alive
 * from a DLPack deleter that may run on any thread, without the GIL, or after the
 * interpreter has shut down.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "arraybridge/dlpack.h"

static const char kVersioned[] = "dltensor_versioned";
static const char kUsedVersioned[] = "used_dltensor_versioned";
static const char kLegacy[] = "dltensor";
static const char kUsedLegacy[] = "used_dltensor";

/* ----------------------------------------------------- deferred releases */

/* Our deleters must never take the GIL: one called inside a runtime call (where
 * cffi has released it) that waits for the GIL while the interpreter finalizes is
 * ended with pthread_exit (Python <= 3.13), and that forced unwind through the
 * runtime's C++ frames aborts the process. So a deleter that runs without the GIL
 * queues its Python work here; the queue is drained with the GIL held right after
 * every runtime call, and by a pending call for deleters run on other threads. */
typedef struct Release {
  struct Release* next;
  void (*finish)(struct Release*); /* runs with the GIL held; frees the node */
} Release;

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static Release* queue_head = NULL;

static int interpreter_usable(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

static int drain_pending(void* unused);

/* Finish now when this thread holds the GIL; queue it otherwise; leak it once the
 * interpreter is going away (the process is exiting). */
static void release_later(Release* node) {
  if (!interpreter_usable()) return;
  if (PyGILState_Check()) {
    node->finish(node);
    return;
  }
  pthread_mutex_lock(&queue_lock);
  int was_empty = queue_head == NULL;
  node->next = queue_head;
  queue_head = node;
  pthread_mutex_unlock(&queue_lock);
  if (was_empty) Py_AddPendingCall(drain_pending, NULL);  /* if refused, the next drain() gets it */
}

static void drain_queue(void) {
  for (;;) {
    pthread_mutex_lock(&queue_lock);
    Release* node = queue_head;
    queue_head = NULL;
    pthread_mutex_unlock(&queue_lock);
    if (!node) return;
    while (node) {  /* a finish may queue more (a decref freeing a Tensor): loop */
      Release* next = node->next;
      node->finish(node);
      node = next;
    }
  }
}

static int drain_pending(void* unused) {
  (void)unused;
  drain_queue();
  return 0;
}

/* ------------------------------------------------------------ owner views */

typedef struct {
  DLManagedTensorVersioned tensor;
  Release release;
  PyObject* owner;
} VersionedView;

typedef struct {
  DLManagedTensor tensor;
  Release release;
  PyObject* owner;
} LegacyView;

#define CONTAINER(type, member, pointer) ((type*)((char*)(pointer)-offsetof(type, member)))

static void finish_versioned_view(Release* node) {
  VersionedView* view = CONTAINER(VersionedView, release, node);
  PyObject* owner = view->owner;
  free(view);
  Py_DECREF(owner);
}

static void finish_legacy_view(Release* node) {
  LegacyView* view = CONTAINER(LegacyView, release, node);
  PyObject* owner = view->owner;
  free(view);
  Py_DECREF(owner);
}

static void versioned_view_deleter(DLManagedTensorVersioned* self) {
  release_later(&((VersionedView*)self)->release);
}

static void legacy_view_deleter(DLManagedTensor* self) { release_later(&((LegacyView*)self)->release); }

/* The view shares `base`'s data, shape and strides; `owner` keeps base alive.
 * READ_ONLY is kept; IS_COPIED only when the caller made a copy for this export,
 * since base itself stays shared with its Python owner. */
static DLManagedTensorVersioned* new_versioned_view(const DLManagedTensorVersioned* base, PyObject* owner,
                                                    uint64_t extra_flags) {
  VersionedView* view = (VersionedView*)malloc(sizeof *view);
  if (!view) return (DLManagedTensorVersioned*)PyErr_NoMemory();
  view->tensor.version.major = DLPACK_MAJOR_VERSION;
  view->tensor.version.minor = DLPACK_MINOR_VERSION;
  view->tensor.manager_ctx = view;
  view->tensor.deleter = versioned_view_deleter;
  view->tensor.flags = (base->flags & DLPACK_FLAG_BITMASK_READ_ONLY) | extra_flags;
  view->tensor.dl_tensor = base->dl_tensor;
  view->release.finish = finish_versioned_view;
  view->owner = owner;
  Py_INCREF(owner);
  return &view->tensor;
}

static DLManagedTensor* new_legacy_view(const DLManagedTensorVersioned* base, PyObject* owner) {
  LegacyView* view = (LegacyView*)malloc(sizeof *view);
  if (!view) return (DLManagedTensor*)PyErr_NoMemory();
  view->tensor.dl_tensor = base->dl_tensor;
  view->tensor.manager_ctx = view;
  view->tensor.deleter = legacy_view_deleter;
  view->release.finish = finish_legacy_view;
  view->owner = owner;
  Py_INCREF(owner);
  return &view->tensor;
}

/* A tensor imported from a capsule, wrapped so that its producer's deleter (which
 * may take the GIL, as NumPy's does) also runs only with the GIL held. Legacy
 * tensors come out versioned, with no flags, which is all a legacy tensor says. */
typedef struct {
  DLManagedTensorVersioned tensor;
  Release release;
  void* foreign;
  int versioned;
} ForeignTensor;

static void finish_foreign(Release* node) {
  ForeignTensor* wrapper = CONTAINER(ForeignTensor, release, node);
  if (wrapper->versioned) {
    DLManagedTensorVersioned* t = (DLManagedTensorVersioned*)wrapper->foreign;
    if (t->deleter) t->deleter(t);
  } else {
    DLManagedTensor* t = (DLManagedTensor*)wrapper->foreign;
    if (t->deleter) t->deleter(t);
  }
  free(wrapper);
}

static void foreign_deleter(DLManagedTensorVersioned* self) { release_later(&((ForeignTensor*)self)->release); }

static DLManagedTensorVersioned* wrap_foreign(void* foreign, int versioned) {
  ForeignTensor* wrapper = (ForeignTensor*)malloc(sizeof *wrapper);
  if (!wrapper) return (DLManagedTensorVersioned*)PyErr_NoMemory();
  wrapper->foreign = foreign;
  wrapper->versioned = versioned;
  wrapper->release.finish = finish_foreign;
  DLManagedTensorVersioned* self = &wrapper->tensor;
  if (versioned) {
    *self = *(DLManagedTensorVersioned*)foreign; /* version and flags as the producer set them */
  } else {
    self->version.major = 1;
    self->version.minor = 0;
    self->flags = 0;
    self->dl_tensor = ((DLManagedTensor*)foreign)->dl_tensor;
  }
  self->manager_ctx = wrapper;
  self->deleter = foreign_deleter;
  return self;
}

static int parse_base(PyObject* arg, DLManagedTensorVersioned** base) {
  void* p = PyLong_AsVoidPtr(arg);
  if (!p) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "arraybridge: NULL tensor address");
    return -1;
  }
  *base = (DLManagedTensorVersioned*)p;
  return 0;
}

/* ---------------------------------------------------------------- capsules */

/* Runs when a capsule is garbage-collected: only an unconsumed one still owns
 * its tensor. Keeps any exception in flight, as the DLPack spec asks. */
static void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedVersioned) || PyCapsule_IsValid(capsule, kUsedLegacy)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyCapsule_IsValid(capsule, kVersioned)) {
    DLManagedTensorVersioned* t = (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, kVersioned);
    if (t->deleter) t->deleter(t);
  } else if (PyCapsule_IsValid(capsule, kLegacy)) {
    DLManagedTensor* t = (DLManagedTensor*)PyCapsule_GetPointer(capsule, kLegacy);
    if (t->deleter) t->deleter(t);
  }
  PyErr_Restore(type, value, traceback);
}

/* export(base_address, owner, versioned, copied) -> capsule sharing base, owned by owner */
static PyObject* export_capsule(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "export(base_address, owner, versioned, copied)");
    return NULL;
  }
  DLManagedTensorVersioned* base;
  if (parse_base(args[0], &base) < 0) return NULL;
  int versioned = PyObject_IsTrue(args[2]);
  int copied = PyObject_IsTrue(args[3]);
  if (versioned < 0 || copied < 0) return NULL;
  if (versioned) {
    DLManagedTensorVersioned* view =
        new_versioned_view(base, args[1], copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
    if (!view) return NULL;
    PyObject* capsule = PyCapsule_New(view, kVersioned, capsule_destructor);
    if (!capsule) view->deleter(view);
    return capsule;
  }
  DLManagedTensor* view = new_legacy_view(base, args[1]);
  if (!view) return NULL;
  PyObject* capsule = PyCapsule_New(view, kLegacy, capsule_destructor);
  if (!capsule) view->deleter(view);
  return capsule;
}

/* view(base_address, owner) -> address of a versioned view for the runtime to own */
static PyObject* export_view(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "view(base_address, owner)");
    return NULL;
  }
  DLManagedTensorVersioned* base;
  if (parse_base(args[0], &base) < 0) return NULL;
  DLManagedTensorVersioned* view = new_versioned_view(base, args[1], 0);
  if (!view) return NULL;
  PyObject* address = PyLong_FromVoidPtr(view);
  if (!address) view->deleter(view);
  return address;
}

/* consume(capsule) -> address of a versioned tensor owning the capsule's tensor.
 * Renames the capsule, so neither a second import nor its destructor can use it. */
static PyObject* consume_capsule(PyObject* module, PyObject* capsule) {
  (void)module;
  if (!PyCapsule_CheckExact(capsule)) {
    PyErr_Format(PyExc_TypeError, "arraybridge: expected a DLPack capsule, got %.200s", Py_TYPE(capsule)->tp_name);
    return NULL;
  }
  const char* name = PyCapsule_GetName(capsule);
  if (!name) {
    PyErr_Clear();
    name = "";
  }
  int versioned;
  const char* used;
  if (strcmp(name, kVersioned) == 0) {
    versioned = 1;
    used = kUsedVersioned;
  } else if (strcmp(name, kLegacy) == 0) {
    versioned = 0;
    used = kUsedLegacy;
  } else if (strcmp(name, kUsedVersioned) == 0 || strcmp(name, kUsedLegacy) == 0) {
    PyErr_Format(PyExc_BufferError,
                 "arraybridge: this DLPack capsule was already consumed (its name is '%s'); "
                 "a capsule can be imported only once", name);
    return NULL;
  } else {
    PyErr_Format(PyExc_BufferError,
                 "arraybridge: not a DLPack capsule: its name is '%.100s', expected "
                 "'dltensor_versioned' or 'dltensor'", name);
    return NULL;
  }
  void* tensor = PyCapsule_GetPointer(capsule, name);
  if (!tensor) return NULL;
  DLManagedTensorVersioned* wrapper = wrap_foreign(tensor, versioned);
  if (!wrapper) return NULL;
  PyObject* result = PyLong_FromVoidPtr(wrapper);
  if (!result || PyCapsule_SetName(capsule, used) < 0 || PyCapsule_SetDestructor(capsule, NULL) < 0) {
    Py_XDECREF(result);
    free(wrapper);  /* the capsule still owns the tensor */
    return NULL;
  }
  return result;
}

/* drain() runs the releases deleters queued while they lacked the GIL. */
static PyObject* drain(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  if (__atomic_load_n(&queue_head, __ATOMIC_ACQUIRE)) drain_queue(); /* a miss is caught by the pending call */
  Py_RETURN_NONE;
}

/* capsule_name(capsule) -> str: for tests and error messages. */
static PyObject* capsule_name(PyObject* module, PyObject* capsule) {
  (void)module;
  if (!PyCapsule_CheckExact(capsule)) {
    PyErr_Format(PyExc_TypeError, "expected a capsule, got %.200s", Py_TYPE(capsule)->tp_name);
    return NULL;
  }
  const char* name = PyCapsule_GetName(capsule);
  if (!name) return NULL;
  return PyUnicode_FromString(name);
}

static PyMethodDef methods[] = {
    {"export", (PyCFunction)(void (*)(void))export_capsule, METH_FASTCALL,
     "export(base_address, owner, versioned, copied) -> a DLPack capsule viewing base, keeping owner alive"},
    {"view", (PyCFunction)(void (*)(void))export_view, METH_FASTCALL,
     "view(base_address, owner) -> address of a DLManagedTensorVersioned view keeping owner alive"},
    {"consume", consume_capsule, METH_O, "consume(capsule) -> address of a versioned tensor owning the capsule's; renames it used_*"},
    {"capsule_name", capsule_name, METH_O, "capsule_name(capsule) -> its name"},
    {"drain", drain, METH_NOARGS, "drain() finishes releases queued by deleters that ran without the GIL"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "arraybridge._capsule",
                                        "DLPack capsules and owner views for arraybridge", -1, methods};

PyMODINIT_FUNC PyInit__capsule(void) { return PyModule_Create(&module_def); }
