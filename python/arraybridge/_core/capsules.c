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

/* What a view keeps beside its tensor. `capsule`: the capsule that exports the view,
 * while it lives (its context is the view), else NULL. A consumer may call the
 * deleter without renaming the capsule (torch's from_dlpack does, when it fails
 * part way): the capsule must then not delete the view again, so the view's memory
 * lasts until both its deleter has finished and its capsule is gone. `deleted` is
 * set by the deleter (any thread); the rest is read and written with the GIL. */
typedef struct {
  Release release;
  PyObject* owner; /* NULL once the deleter's finish has run */
  PyObject* capsule;
  int deleted;
  void* memory; /* the view's own allocation */
} ViewLife;

typedef struct {
  DLManagedTensorVersioned tensor;
  ViewLife life;
} VersionedView;

typedef struct {
  DLManagedTensor tensor;
  ViewLife life;
} LegacyView;

#define CONTAINER(type, member, pointer) ((type*)((char*)(pointer)-offsetof(type, member)))

/* The views are Python's small-object memory (cheaper than malloc's, as a batch of
 * small tensors makes one a tensor): made with the GIL held, freed by a finish (or
 * by their capsule's destructor, whichever comes last), which run with it. */
static void finish_view(Release* node) {
  ViewLife* life = CONTAINER(ViewLife, release, node);
  PyObject* owner = life->owner;
  life->owner = NULL;
  if (!life->capsule) PyMem_Free(life->memory);
  Py_DECREF(owner);
}

static void delete_view(ViewLife* life) {
  __atomic_store_n(&life->deleted, 1, __ATOMIC_RELEASE);
  release_later(&life->release);
}

static void versioned_view_deleter(DLManagedTensorVersioned* self) { delete_view(&((VersionedView*)self)->life); }

static void legacy_view_deleter(DLManagedTensor* self) { delete_view(&((LegacyView*)self)->life); }

static void view_life_init(ViewLife* life, PyObject* owner, void* memory) {
  life->release.finish = finish_view;
  life->owner = owner;
  life->capsule = NULL;
  life->deleted = 0;
  life->memory = memory;
  Py_INCREF(owner);
}

/* The view shares `base`'s data, shape and strides; `owner` keeps base alive.
 * READ_ONLY is kept; IS_COPIED only when the caller made a copy for this export,
 * since base itself stays shared with its Python owner. */
DLManagedTensorVersioned* new_owner_view(const DLManagedTensorVersioned* base, PyObject* owner, int copied) {
  VersionedView* view = (VersionedView*)PyMem_Malloc(sizeof *view);
  if (!view) return (DLManagedTensorVersioned*)PyErr_NoMemory();
  view->tensor.version.major = DLPACK_MAJOR_VERSION;
  view->tensor.version.minor = DLPACK_MINOR_VERSION;
  view->tensor.manager_ctx = view;
  view->tensor.deleter = versioned_view_deleter;
  view->tensor.flags = (base->flags & DLPACK_FLAG_BITMASK_READ_ONLY) | (copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
  view->tensor.dl_tensor = base->dl_tensor;
  view_life_init(&view->life, owner, view);
  return &view->tensor;
}

static DLManagedTensor* new_legacy_view(const DLManagedTensorVersioned* base, PyObject* owner) {
  LegacyView* view = (LegacyView*)PyMem_Malloc(sizeof *view);
  if (!view) return (DLManagedTensor*)PyErr_NoMemory();
  view->tensor.dl_tensor = base->dl_tensor;
  view->tensor.manager_ctx = view;
  view->tensor.deleter = legacy_view_deleter;
  view_life_init(&view->life, owner, view);
  return &view->tensor;
}

/* A producer's tensor wrapped so that its deleter (which may take the GIL, as
 * NumPy's does) runs only with the GIL held, whichever thread lets go of the
 * wrapper. Legacy tensors come out versioned, with no flags, which is all a
 * legacy tensor says. */
typedef struct {
  DLManagedTensorVersioned tensor;
  Release release;
  Imported foreign;
} ForeignTensor;

const DLTensor* imported_tensor(const Imported* imported) {
  return imported->versioned ? &((DLManagedTensorVersioned*)imported->tensor)->dl_tensor
                             : &((DLManagedTensor*)imported->tensor)->dl_tensor;
}

/* Keeps any exception in flight, as capsule_destructor does: a failed call deletes
 * its imports after raising, and a producer's deleter may run Python code, which
 * must not start with an exception set (it would fail, and lose ours). */
void imported_delete(Imported* imported) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (imported->versioned) {
    DLManagedTensorVersioned* t = (DLManagedTensorVersioned*)imported->tensor;
    if (t->deleter) t->deleter(t);
  } else {
    DLManagedTensor* t = (DLManagedTensor*)imported->tensor;
    if (t->deleter) t->deleter(t);
  }
  imported->tensor = NULL;
  PyErr_Restore(type, value, traceback);
}

static void finish_foreign(Release* node) {
  ForeignTensor* wrapper = CONTAINER(ForeignTensor, release, node);
  imported_delete(&wrapper->foreign);
  PyMem_Free(wrapper);
}

static void foreign_deleter(DLManagedTensorVersioned* self) { release_later(&((ForeignTensor*)self)->release); }

DLManagedTensorVersioned* imported_for_any_thread(Imported* imported) {
  if (imported->any_thread && imported->versioned) return (DLManagedTensorVersioned*)imported->tensor;
  ForeignTensor* wrapper = (ForeignTensor*)PyMem_Malloc(sizeof *wrapper); /* freed as the views are */
  if (!wrapper) {
    imported_delete(imported);
    return (DLManagedTensorVersioned*)PyErr_NoMemory();
  }
  wrapper->foreign = *imported;
  wrapper->release.finish = finish_foreign;
  DLManagedTensorVersioned* self = &wrapper->tensor;
  if (imported->versioned) {
    *self = *(DLManagedTensorVersioned*)imported->tensor; /* version and flags as the producer set them */
  } else {
    self->version.major = 1;
    self->version.minor = 0;
    self->flags = 0;
    self->dl_tensor = ((DLManagedTensor*)imported->tensor)->dl_tensor;
  }
  self->manager_ctx = wrapper;
  self->deleter = foreign_deleter;
  return self;
}

int imported_mark_read_only(Imported* imported) {
  if (!imported->versioned) {
    DLManagedTensorVersioned* wrapped = imported_for_any_thread(imported);
    if (!wrapped) return -1;
    imported->tensor = wrapped;
    imported->versioned = 1;
    imported->any_thread = 1;
  }
  ((DLManagedTensorVersioned*)imported->tensor)->flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  return 0;
}

/* ---------------------------------------------------------------- capsules */

/* Runs when a capsule is garbage-collected. Its context is our view: the capsule
 * still owns it when it carries the name we gave it (a consumer renames it used_*)
 * and nobody called its deleter; a view already deleted, or handed to a consumer,
 * is only let go (freed here when its finish has run). Keeps any exception in
 * flight, as the DLPack spec asks. */
static void capsule_destructor(PyObject* capsule) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  ViewLife* life = (ViewLife*)PyCapsule_GetContext(capsule);
  const char* name = PyCapsule_GetName(capsule);
  if (life) {
    life->capsule = NULL;
    if (__atomic_load_n(&life->deleted, __ATOMIC_ACQUIRE)) {
      if (!life->owner) PyMem_Free(life->memory); /* its finish ran while we lived */
    } else if (name == kVersioned) {
      DLManagedTensorVersioned* t = (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, name);
      if (t && t->deleter) t->deleter(t);
    } else if (name == kLegacy) {
      DLManagedTensor* t = (DLManagedTensor*)PyCapsule_GetPointer(capsule, name);
      if (t && t->deleter) t->deleter(t);
    }
  }
  PyErr_Clear(); /* a capsule without context, or a name that could not be read */
  PyErr_Restore(type, value, traceback);
}

/* A capsule that owns `view` (whose life is `life`) until a consumer renames it. */
static PyObject* capsule_of(void* view, const char* name, ViewLife* life) {
  PyObject* capsule = PyCapsule_New(view, name, capsule_destructor);
  if (capsule && PyCapsule_SetContext(capsule, life) < 0) {
    PyCapsule_SetDestructor(capsule, NULL); /* the caller deletes the view */
    Py_CLEAR(capsule);
  }
  if (capsule) life->capsule = capsule;
  return capsule;
}

PyObject* export_capsule(const DLManagedTensorVersioned* base, PyObject* owner, int versioned, int copied) {
  if (versioned) {
    DLManagedTensorVersioned* view = new_owner_view(base, owner, copied);
    if (!view) return NULL;
    PyObject* capsule = capsule_of(view, kVersioned, &((VersionedView*)view)->life);
    if (!capsule) view->deleter(view);
    return capsule;
  }
  DLManagedTensor* view = new_legacy_view(base, owner);
  if (!view) return NULL;
  PyObject* capsule = capsule_of(view, kLegacy, &((LegacyView*)view)->life);
  if (!capsule) view->deleter(view);
  return capsule;
}

int consume_capsule(PyObject* capsule, Imported* out) {
  /* The common case first: one name comparison, inside PyCapsule_GetPointer. */
  void* tensor = PyCapsule_GetPointer(capsule, kVersioned);
  int versioned = 1;
  const char* used = kUsedVersioned;
  if (!tensor) {
    PyErr_Clear();
    const char* name = PyCapsule_GetName(capsule);
    if (!name) {
      PyErr_Clear();
      name = "";
    }
    if (strcmp(name, kLegacy) == 0) {
      versioned = 0;
      used = kUsedLegacy;
      if (!(tensor = PyCapsule_GetPointer(capsule, kLegacy))) return -1;
    } else if (strcmp(name, kUsedVersioned) == 0 || strcmp(name, kUsedLegacy) == 0) {
      PyErr_Format(PyExc_BufferError,
                   "arraybridge: this DLPack capsule was already consumed (its name is '%s'); "
                   "a capsule can be imported only once",
                   name);
      return -1;
    } else {
      PyErr_Format(PyExc_BufferError,
                   "arraybridge: not a DLPack capsule: its name is '%.100s', expected "
                   "'dltensor_versioned' or 'dltensor'",
                   name);
      return -1;
    }
  }
  if (PyCapsule_SetName(capsule, used) < 0) return -1; /* the capsule still owns the tensor */
  /* The tensor is ours now. One of our own capsules lets its view go at once: its
   * destructor runs no more, and the view's finish frees it. */
  if (PyCapsule_GetDestructor(capsule) == capsule_destructor) {
    ViewLife* life = (ViewLife*)PyCapsule_GetContext(capsule);
    if (life) life->capsule = NULL;
  }
  if (PyCapsule_SetDestructor(capsule, NULL) < 0) return -1;
  out->tensor = tensor;
  out->versioned = versioned;
  out->any_thread = 0; /* a producer's deleter: it may need the GIL */
  out->work_stream = 0;
  return 0;
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
