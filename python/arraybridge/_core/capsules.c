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

/* What a view keeps beside its tensor. A consumer may call a capsule's deleter
 * without renaming the capsule (torch's from_dlpack does when it fails part way),
 * and the capsule's destructor must then not delete the view again; but a consumer
 * may also rename the capsule, take away its destructor (JAX does) and delete the
 * view long after the capsule is gone, so the view cannot know whether its capsule
 * lives. So a view exported in a capsule comes from a free list of its own and its
 * memory never goes back to the allocator: its `generation` (nonzero, unique to this
 * export) is also the capsule's context, and a destructor that finds
 * another generation in the view knows the view was deleted already. The deleter
 * (any thread) ends the generation at once: its finish may wait for the GIL, and the
 * capsule may die before it runs. */
typedef struct ViewLife {
  Release release;
  PyObject* owner;
  uintptr_t generation;  /* a capsule's view: its export's number until deleted, else 0 (atomic) */
  int pooled;            /* a capsule's view: goes back on its free list, never to the allocator */
  struct ViewLife* next; /* on the free list */
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

/* Capsules' views, free for the next export (the GIL guards both lists). */
static ViewLife *free_versioned, *free_legacy;
static uintptr_t last_generation;

/* The views are Python's small-object memory (cheaper than malloc's, as a batch of
 * small tensors makes one a tensor): made with the GIL held, freed (or put on their
 * free list) by a finish, which runs with it. */
static void finish_view(Release* node, ViewLife** free_list, void* memory) {
  ViewLife* life = CONTAINER(ViewLife, release, node);
  PyObject* owner = life->owner;
  if (life->pooled) {
    life->next = *free_list;
    *free_list = life;
  } else {
    PyMem_Free(memory);
  }
  Py_DECREF(owner);
}

static void finish_versioned_view(Release* node) {
  finish_view(node, &free_versioned, CONTAINER(VersionedView, life.release, node));
}

static void finish_legacy_view(Release* node) {
  finish_view(node, &free_legacy, CONTAINER(LegacyView, life.release, node));
}

static void view_deleted(ViewLife* life) {
  __atomic_store_n(&life->generation, 0, __ATOMIC_RELEASE); /* before the finish is queued: see ViewLife */
  release_later(&life->release);
}

static void versioned_view_deleter(DLManagedTensorVersioned* self) { view_deleted(&((VersionedView*)self)->life); }

static void legacy_view_deleter(DLManagedTensor* self) { view_deleted(&((LegacyView*)self)->life); }

/* A view's memory: from its free list when it goes into a capsule (`generation` set). */
static void* take_view(size_t size, ViewLife** free_list, size_t life_offset, uintptr_t generation) {
  if (generation && *free_list) {
    ViewLife* life = *free_list;
    *free_list = life->next;
    return (char*)life - life_offset;
  }
  void* memory = PyMem_Malloc(size);
  return memory ? memory : PyErr_NoMemory();
}

static void view_life_init(ViewLife* life, PyObject* owner, uintptr_t generation) {
  life->owner = owner;
  life->generation = generation;
  life->pooled = generation != 0;
  life->next = NULL;
  Py_INCREF(owner);
}

static DLManagedTensorVersioned* versioned_view(const DLManagedTensorVersioned* base, PyObject* owner, int copied,
                                                uintptr_t generation) {
  VersionedView* view =
      (VersionedView*)take_view(sizeof(VersionedView), &free_versioned, offsetof(VersionedView, life), generation);
  if (!view) return NULL;
  view->tensor.version.major = DLPACK_MAJOR_VERSION;
  view->tensor.version.minor = DLPACK_MINOR_VERSION;
  view->tensor.manager_ctx = view;
  view->tensor.deleter = versioned_view_deleter;
  view->tensor.flags = (base->flags & DLPACK_FLAG_BITMASK_READ_ONLY) | (copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
  view->tensor.dl_tensor = base->dl_tensor;
  view->life.release.finish = finish_versioned_view;
  view_life_init(&view->life, owner, generation);
  return &view->tensor;
}

/* The view shares `base`'s data, shape and strides; `owner` keeps base alive.
 * READ_ONLY is kept; IS_COPIED only when the caller made a copy for this export,
 * since base itself stays shared with its Python owner. */
DLManagedTensorVersioned* new_owner_view(const DLManagedTensorVersioned* base, PyObject* owner, int copied) {
  return versioned_view(base, owner, copied, 0);
}

static DLManagedTensor* new_legacy_view(const DLManagedTensorVersioned* base, PyObject* owner, uintptr_t generation) {
  LegacyView* view = (LegacyView*)take_view(sizeof(LegacyView), &free_legacy, offsetof(LegacyView, life), generation);
  if (!view) return NULL;
  view->tensor.dl_tensor = base->dl_tensor;
  view->tensor.manager_ctx = view;
  view->tensor.deleter = legacy_view_deleter;
  view->life.release.finish = finish_legacy_view;
  view_life_init(&view->life, owner, generation);
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
  imported->viewed = NULL; /* a capsule's Tensor may have gone with its view */
  imported->pending_event = NULL;
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

/* Runs when a capsule is garbage-collected: only one still carrying the name we
 * gave it (the same pointer: a consumer renames it used_*) whose view is still its
 * export's (the generation in its context: a consumer may have deleted it without
 * renaming) owns its tensor. Keeps any exception in flight, as the DLPack spec asks. */
static void capsule_destructor(PyObject* capsule) {
  const char* name = PyCapsule_GetName(capsule);
  if (name != kVersioned && name != kLegacy) {
    if (!name) PyErr_Clear();
    return;
  }
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  const uintptr_t generation = (uintptr_t)PyCapsule_GetContext(capsule);
  void* tensor = PyCapsule_GetPointer(capsule, name);
  if (name == kVersioned) {
    VersionedView* view = (VersionedView*)tensor;
    if (__atomic_load_n(&view->life.generation, __ATOMIC_ACQUIRE) == generation) view->tensor.deleter(&view->tensor);
  } else {
    LegacyView* view = (LegacyView*)tensor;
    if (__atomic_load_n(&view->life.generation, __ATOMIC_ACQUIRE) == generation) view->tensor.deleter(&view->tensor);
  }
  PyErr_Restore(type, value, traceback);
}

PyObject* export_capsule(const DLManagedTensorVersioned* base, PyObject* owner, int versioned, int copied) {
  const uintptr_t generation = ++last_generation;
  void* view = versioned ? (void*)versioned_view(base, owner, copied, generation)
                         : (void*)new_legacy_view(base, owner, generation);
  if (!view) return NULL;
  PyObject* capsule = PyCapsule_New(view, versioned ? kVersioned : kLegacy, capsule_destructor);
  if (capsule && PyCapsule_SetContext(capsule, (void*)generation) < 0) {
    PyCapsule_SetDestructor(capsule, NULL); /* deleted below */
    Py_CLEAR(capsule);
  }
  if (!capsule) {
    if (versioned)
      ((DLManagedTensorVersioned*)view)->deleter((DLManagedTensorVersioned*)view);
    else
      ((DLManagedTensor*)view)->deleter((DLManagedTensor*)view);
  }
  return capsule;
}

/* The arraybridge Tensor a view of ours keeps (its owner, or the first of an owner
 * tuple), else NULL: what a capsule a Tensor exported is, for its importer's ordering. */
static PyObject* viewed_tensor(void* tensor, int versioned) {
  const ViewLife* life = NULL;
  if (versioned && ((DLManagedTensorVersioned*)tensor)->deleter == versioned_view_deleter)
    life = &((VersionedView*)tensor)->life;
  else if (!versioned && ((DLManagedTensor*)tensor)->deleter == legacy_view_deleter)
    life = &((LegacyView*)tensor)->life;
  PyObject* owner = life ? life->owner : NULL;
  if (owner && PyTuple_Check(owner)) owner = PyTuple_GET_ITEM(owner, 0);
  return owner && tensor_check(owner) ? owner : NULL;
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
  if (PyCapsule_SetName(capsule, used) < 0 || PyCapsule_SetDestructor(capsule, NULL) < 0)
    return -1; /* the capsule still owns the tensor */
  out->tensor = tensor;
  out->versioned = versioned;
  out->any_thread = 0; /* a producer's deleter: it may need the GIL */
  out->work_stream = 0;
  out->viewed = viewed_tensor(tensor, versioned);
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
