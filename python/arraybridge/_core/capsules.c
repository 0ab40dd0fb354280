/*
 * DLPack capsules (made with a C destructor, consumed by renaming) and the views
 * that keep a Python owner alive from a DLPack deleter that may run on any thread,
 * without the GIL, or after the interpreter has shut down.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

static const char kVersioned[] = "dltensor_versioned";
static const char kUsedVersioned[] = "used_dltensor_versioned";
static const char kLegacy[] = "dltensor";
static const char kUsedLegacy[] = "used_dltensor";

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
DLManagedTensorVersioned* new_owner_view(const DLManagedTensorVersioned* base, PyObject* owner, int copied) {
  VersionedView* view = (VersionedView*)malloc(sizeof *view);
  if (!view) return (DLManagedTensorVersioned*)PyErr_NoMemory();
  view->tensor.version.major = DLPACK_MAJOR_VERSION;
  view->tensor.version.minor = DLPACK_MINOR_VERSION;
  view->tensor.manager_ctx = view;
  view->tensor.deleter = versioned_view_deleter;
  view->tensor.flags = (base->flags & DLPACK_FLAG_BITMASK_READ_ONLY) | (copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
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

PyObject* export_capsule(const DLManagedTensorVersioned* base, PyObject* owner, int versioned, int copied) {
  if (versioned) {
    DLManagedTensorVersioned* view = new_owner_view(base, owner, copied);
    if (!view) return NULL;
    PyObject* capsule = PyCapsule_New(view, kVersioned, capsule_destructor);
    if (!capsule) view->deleter(view);
    return capsule;
  }
  DLManagedTensor* view = new_legacy_view(base, owner);
  if (!view) return NULL;
  PyObject* capsule = PyCapsule_New(view, kLegacy, capsule_destructor);
  if (!capsule) view->deleter(view);
  return capsule;
}

DLManagedTensorVersioned* consume_capsule(PyObject* capsule) {
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
  if (PyCapsule_SetName(capsule, used) < 0 || PyCapsule_SetDestructor(capsule, NULL) < 0) {
    free(wrapper); /* the capsule still owns the tensor */
    return NULL;
  }
  return wrapper;
}

/* capsule_name(capsule) -> str: for tests and error messages. */
PyObject* capsule_name(PyObject* module, PyObject* capsule) {
  (void)module;
  if (!PyCapsule_CheckExact(capsule)) {
    PyErr_Format(PyExc_TypeError, "expected a capsule, got %.200s", Py_TYPE(capsule)->tp_name);
    return NULL;
  }
  const char* name = PyCapsule_GetName(capsule);
  if (!name) return NULL;
  return PyUnicode_FromString(name);
}
