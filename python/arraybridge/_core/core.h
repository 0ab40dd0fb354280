/*
 * arraybridge._core: the binding's hot path in C. A DLPack round trip costs a
 * few hundred nanoseconds in C and microseconds through cffi and Python frames,
 * so importing, transferring, the Tensor type and capsules live here, and so does
 * the runtime: this module alone holds the abr_runtime* and the tensors' pointers.
 * The rest of the package (errors, parsing rarely used arguments) stays in Python,
 * reached through the hooks below; it uses cffi only for the library's
 * vocabulary (names, constants), which needs no runtime. These files are compiled
 * into that cffi module (python/native_build.py), the package's one native module,
 * which makes this one when asked (abr_python_core_install, module.c).
 *
 * Files depend only downwards: release, capsules, args <- tensor; hooks <-
 * runtime <- exchange <- transfer <- ipc <- module.
 */
#ifndef ARRAYBRIDGE_CORE_H
#define ARRAYBRIDGE_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "arraybridge/arraybridge.h"

/* Bytes of one element (lanes included), rounded up for sub-byte types. */
static inline int64_t dtype_item_bytes(DLDataType dtype) { return ((int64_t)dtype.bits * dtype.lanes + 7) / 8; }
/* The bytes of t's elements, laid compact (its shape readable): what copying all of it writes. */
static inline uint64_t tensor_bytes(const DLTensor* t) {
  uint64_t bytes = (uint64_t)dtype_item_bytes(t->dtype);
  for (int32_t d = 0; d < t->ndim; ++d) bytes *= (uint64_t)t->shape[d];
  return bytes;
}

/* ---------------------------------------------------------- release.c */

/* Python work a DLPack deleter must do (a decref, a producer's deleter), done
 * now when the thread holds the GIL, else queued and done by core_drain(). */
typedef struct Release {
  struct Release* next;
  void (*finish)(struct Release*); /* runs with the GIL held; frees the node */
} Release;

void release_later(Release* node);
void core_drain(void); /* with the GIL held: finish what deleters queued */

/* ---------------------------------------------------------- capsules.c */

/* A DLPack tensor taken from a producer, owned by the caller until handed on. */
typedef struct {
  void* tensor; /* a DLManagedTensorVersioned*, or a DLManagedTensor* when !versioned */
  int versioned;
  int any_thread;          /* its deleter may run on any thread without the GIL (one of our own views) */
  uintptr_t work_stream;   /* the producer's current CUDA stream (DLPack value) from its exchange API, else 0 */
  int resolved;            /* the producer's lazy bits were resolved into a copy first (torch's conj/neg views) */
  int keep_pending;        /* set by the caller: a Tensor whose work is still queued is not waited for; see after */
  abr_event* after;        /* with keep_pending: the queued work a Tensor source waits for (borrowed), else NULL */
  PyObject* torch_twin;    /* the torch tensor whose memory this is, writable, when a write must bump its version
                              counter (borrowed: the source keeps it), else NULL */
  PyObject* written;       /* a destination's torch tensor (or a Tensor's twin), whose version counter the call
                              bumps once it has written (torch_tell_written; borrowed), else NULL */
  PyObject* viewed;        /* the arraybridge Tensor whose memory this is: the source itself, or the Tensor a
                              capsule of ours views (borrowed: the import keeps it), else NULL */
  PyObject* pending_event; /* with `after`: the Event it belongs to, the Tensor's then (borrowed: the view keeps
                              it), else NULL */
} Imported;

const DLTensor* imported_tensor(const Imported* imported);
void imported_delete(Imported* imported); /* with the GIL held */
/* The tensor as a versioned one whose deleter may run on any thread without the
 * GIL (a producer's deleter is then deferred to a thread that holds it): what a
 * runtime call that releases the GIL may be given. NULL with an exception (and
 * the tensor deleted) on failure. */
DLManagedTensorVersioned* imported_for_any_thread(Imported* imported);
/* Marks the import READ_ONLY (a legacy one is wrapped as versioned to carry the
 * flag). -1 with an exception, and the tensor deleted, on failure. */
int imported_mark_read_only(Imported* imported);

/* A versioned view of `base` whose deleter releases `owner` (a new reference is
 * taken); IS_COPIED added when `copied`. NULL with an exception on failure. */
DLManagedTensorVersioned* new_owner_view(const DLManagedTensorVersioned* base, PyObject* owner, int copied);
/* A DLPack capsule viewing `base`, owned by `owner`: versioned or legacy. */
PyObject* export_capsule(const DLManagedTensorVersioned* base, PyObject* owner, int versioned, int copied);
/* Takes the tensor a capsule holds and renames the capsule used_*; -1 with
 * BufferError when it is not an unused DLPack capsule. */
int consume_capsule(PyObject* capsule, Imported* out);
PyObject* capsule_name(PyObject* module, PyObject* capsule);

/* ---------------------------------------------------------- tensor.c */

typedef struct {
  PyObject_HEAD DLManagedTensorVersioned* tensor; /* owned; NULL only while being made */
  abr_transfer_report report;                     /* what the transfer that made it did (its version set before) */
  PyObject* weakrefs;
  PyObject* ready; /* an Event while the work that fills it may be queued, else NULL */
  /* A torch tensor whose memory this Tensor views writable (zero-copy, or wrapped for a
   * device that shares host memory), else NULL: each write into the Tensor bumps its
   * version counter, as a write through torch would, so a backward pass that saved it
   * raises instead of computing from the new values. */
  PyObject* torch_twin;
  /* The Tensor whose memory this one is (a zero-copy view or a host wrap made of a
   * Tensor; the first of a chain), else NULL: queued work on either is work on the same
   * memory, so its `ready` orders both (this one's own stays NULL). */
  PyObject* base;
} TensorObject;

extern PyTypeObject TensorBaseType;
int tensor_check(PyObject* object);
/* The Tensor whose `ready` orders this one's uses: its base, or itself. */
static inline TensorObject* tensor_tracked(PyObject* tensor) {
  TensorObject* t = (TensorObject*)tensor;
  return t->base ? (TensorObject*)t->base : t;
}
/* `result` (just made, path `path`) shares the ordering of `source` where it is a view
 * of a Tensor's memory; any Event it had moves to that Tensor. */
void tensor_maybe_view_of(PyObject* result, PyObject* source, abr_path path);
/* A view (or a device's wrap) of what the producer copied to resolve its lazy bits
 * (torch's conj/neg) is no view of the producer's memory: the report says that copy. */
void say_resolved(abr_transfer_report* report, const DLManagedTensorVersioned* out);
PyObject* untracked_type(PyObject* module, PyObject* cls);

/* ---------------------------------------------------------- event.c */

extern PyTypeObject EventType;
/* Takes the event (NULL on failure: it stays the caller's); `keep` (may be NULL) is
 * held until the work is known to be done, and a dealloc before that waits. */
PyObject* event_new(abr_event* event, PyObject* keep);
/* An object that deletes both views (either may be NULL) when it goes: an Event's
 * `keep` for a copy's borrowed arrays. NULL with an exception (nothing taken). */
PyObject* keep_views(DLManagedTensorVersioned* first, DLManagedTensorVersioned* second);
/* The same for `count` views (NULL entries allowed); on failure (NULL) they are still the caller's. */
PyObject* keep_many(DLManagedTensorVersioned* const* views, Py_ssize_t count);
/* Whether any of `count` (object, Event) pairs holds an arraybridge Tensor. */
int any_tensor(PyObject* const* pairs, Py_ssize_t count);
/* hold_completion for the arraybridge Tensors a queued copy reads or writes: an Event
 * of their own (the caller's keeps them, so one Event both ways would be a cycle), which
 * keeps nothing and whose failure the caller's Event tells (never reported again). */
int hold_for_tensors(abr_event* done, const char* context, PyObject** out);
/* Each arraybridge Tensor among `count` (object, Event) pairs holds `event` (NULL: none):
 * its later uses wait for that work, as its deletion does (a blocking read after a
 * queued write into it read stale values). The pair's Event (NULL or None: none) is the
 * one the call was ordered after (Imported::pending_event); queued work another call
 * gave the Tensor meanwhile is waited for first, not forgotten. */
void tensors_hold(PyObject* const* pairs, Py_ssize_t count, PyObject* event);
int event_settle(PyObject* event);        /* blocks (without the GIL) until done: 0, or -1 with an exception */
int event_ready(PyObject* event);         /* 1 done, 0 not yet, -1 with an exception; never blocks */
abr_event* event_handle(PyObject* event); /* NULL once known to be done */
int event_failed(PyObject* event); /* 1 once its failure was raised (or another Event tells it): not reported again */
/* 1 when its wait was refused because it was made before this process forked: a
 * dealloc lets its failure go unsaid (the parent's work, which nothing here reads). */
int event_quiet(PyObject* event);
/* Waits on the host for a Tensor's queued work, if any: 0, or -1 with an exception. */
int tensor_settle(PyObject* tensor);

/* ---------------------------------------------------------- args.c */

/* Interned strings and constants, made at import (names_init, -1 on failure). */
typedef struct {
  PyObject* dlpack;          /* "__dlpack__" */
  PyObject* dlpack_slow;     /* "_dlpack_slow" */
  PyObject* max_version_key; /* ("max_version",): kwnames of the versioned request */
  PyObject* max_version;     /* (1, DLPACK_MINOR_VERSION): the newest DLPack this build speaks */
  PyObject* debug_level;     /* 10: logging.DEBUG, the key of a logger's level cache */
  PyObject* exchange_api;    /* "__dlpack_c_exchange_api__" */
} Names;

extern Names names;
int names_init(void);

/* Sorts fast-call arguments into `slots` by name (NULL when absent): the first
 * `positional` names may also come positionally, the first `required` must come.
 * `interned` (count entries, zeroed) caches the names as interned strings.
 * Returns -1 with TypeError on an unknown, repeated or missing argument. */
int parse_arguments(const char* function, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                    const char* const* texts, PyObject** interned, int count, int positional, int required,
                    PyObject** slots);

/* ---------------------------------------------------------- hooks.c */

/* Python callables the package registers once with _core.setup(). */
typedef struct {
  PyObject* tensor_type;         /* arraybridge.Tensor, a subclass of TensorBase */
  PyObject* parse_device;        /* (device) -> (type, id) */
  PyObject* parse_dtype;         /* (dtype) -> (code, bits, lanes) */
  PyObject* stream_handle;       /* (stream) -> int handle, 0 for none */
  PyObject* producer_strides;    /* (producer, itemsize) -> element strides it meant, or None */
  PyObject* error;               /* (status, context, dst or None) -> exception instance */
  PyObject* log_transfer;        /* (tensor, context) -> None, logs at DEBUG */
  PyObject* producer_traits;     /* (type) -> PRODUCER_* bits of what its framework is known to do */
  PyObject* vet_producer;        /* (producer) -> what to import in its place; raises for what must not be exported */
  PyObject* refusal;             /* (array, role, problem, detail) -> the exception refusing a producer's array */
  PyObject* to_device_structure; /* to_device's own arguments, for a structure of arrays (_structure.py) */
  PyObject* copy_structure;      /* copy's own arguments, for a structure of arrays */
  PyObject* read_only_why;       /* a str: why a destination is read-only, said where a copy into one is refused */
  PyObject* log_cache;           /* the "arraybridge" logger's level cache, or NULL */
  uint32_t runtime_flags;        /* abr_runtime_options.flags for the runtime (ABR_RUNTIME_DISABLE_*) */
} Hooks;

extern Hooks hooks;
#define PRODUCER_IMMUTABLE 1    /* its framework never lets its arrays be written (JAX, TensorFlow) */
#define PRODUCER_VETTED 2       /* its own export can abort the process: vet_producer first (TensorFlow) */
#define PRODUCER_TORCH 4        /* PyTorch: lazy conj/neg bits and autograd, checked by torch_vet */
#define PRODUCER_NDARRAY 8      /* exactly numpy.ndarray: read through the buffer protocol (ndarray.c) */
#define PRODUCER_HOST_BUFFER 16 /* its arrays in host memory give the buffer protocol: read so first (JAX) */
PyObject* core_setup(PyObject* module, PyObject* args, PyObject* kwargs);
/* 0 when the package has registered its hooks, else -1 with an explanation. */
int hooks_ready(void);
/* Sets the exception the error hook makes for `status` (dst: the target device, or NULL). */
void raise_status(abr_status status, const char* context, const DLDevice* dst);

/* ---------------------------------------------------------- record.c */

/* The callable arraybridge.recording() set, or NULL while none is on. */
extern PyObject* recorder;
PyObject* core_set_recorder(PyObject* module, PyObject* callable);
double record_clock(void); /* seconds, monotonic: read only while recorder is set */
/* A hook's failure (the recorder's, the DEBUG log's) once the transfer succeeded:
 * reported as unraisable, never as the transfer's; but a KeyboardInterrupt (Ctrl-C
 * while the hook ran) is raised again as soon as the call returns, never lost. */
void hook_failed(PyObject* hook);
/* Hands one finished transfer (or batch of `tensors`) to the recorder, if still set;
 * its failure goes to hook_failed, never the transfer's. */
void record_transfer(const char* call, DLDevice from, DLDevice to, abr_path path, uint64_t bytes, const char* detail,
                     Py_ssize_t tensors, double start);

/* ---------------------------------------------------------- runtime.c */

/* The runtime, created on first use; NULL with an exception when that fails. */
abr_runtime* core_runtime(void);
PyObject* core_devices(PyObject* module, PyObject* unused);
PyObject* core_backend_info(PyObject* module, PyObject* backend);
PyObject* core_pool_stats(PyObject* module, PyObject* unused);
PyObject* core_pool_trim(PyObject* module, PyObject* only_if_running);
PyObject* core_device_cache_stats(PyObject* module, PyObject* unused);
PyObject* core_set_device_cache_limit(PyObject* module, PyObject* limit);
PyObject* core_set_staging(PyObject* module, PyObject* const* args, Py_ssize_t nargs);

/* ---------------------------------------------------------- exchange.c */

/* The DLPack C exchange API. exchange_publish puts ours on `type`. */
int exchange_publish(PyTypeObject* type);
/* The table of a type (cached), or NULL when it has none this build can use. */
const DLPackExchangeAPI* exchange_api_of(PyTypeObject* type);
/* Takes x through its type's table: 1 when imported, 0 when the type has none
 * (nothing happened), -1 with an exception. */
int exchange_import(PyObject* x, Imported* out);
PyObject* core_hand_over(PyObject* module, PyObject* const* args, Py_ssize_t nargs);
PyObject* core_handover_ns(PyObject* module, PyObject* const* args, Py_ssize_t nargs);

/* ---------------------------------------------------------- args.c (parsers) */

/* Each parses one argument into the request (a NULL value: its default); 0, or -1
 * with an exception. Device strings are parsed by the Python hook once, then cached. */
int unpack_pair(PyObject* pair, DLDevice* out);
int parse_device(PyObject* device, DLDevice* out);
int parse_copy(PyObject* copy, abr_copy_mode* out);
int parse_contiguous(PyObject* value, uint32_t* flags);
int parse_truth(PyObject* value, const char* name, int* out); /* True or False only */
int parse_dtype(PyObject* dtype, DLDataType* out);
/* casting=: None (the call's default), "no", "equiv" (as "no": DLPack has one byte
 * order), "safe", "same_kind" or "unsafe", NumPy's names. */
int parse_casting(PyObject* casting, abr_casting* out);
/* host_staging=False (or strict=True, its old spelling, which warns; not both)
 * refuses any path through host memory: ABR_TRANSFER_NO_HOST_STAGING. */
int parse_host_staging(PyObject* host_staging, PyObject* strict, const char* call, uint32_t* flags);
/* A stream argument (None, a DLPack stream value or a framework's stream object)
 * as a native stream handle, 0 for none; -1 with an exception. */
int parse_stream(PyObject* stream, uintptr_t* out);
/* A plain ValueError or TypeError the package raised as "arraybridge: <problem>"
 * restated as "<call>: <problem>". Always returns NULL. */
PyObject* restated(const char* call);

/* ---------------------------------------------------------- import.c */

/* What an import is for: a transfer that may copy, one that must not, a write into
 * it, or its memory shared as it is with another process (IPC). */
typedef enum { IMPORT_MAY_COPY, IMPORT_NO_COPY, IMPORT_DESTINATION, IMPORT_SHARED } ImportPurpose;
/* The producer's tensor, owned by the caller: a view of a Tensor, a consumed
 * capsule, what its type's exchange API exports, or what __dlpack__ returns.
 * role: the argument's name, for errors. */
int import_source(PyObject* x, const char* role, ImportPurpose purpose, Imported* out);
/* The Tensors whose memory `count` imports are (their `viewed`), each with the Event
 * the call is ordered after (pending_event, else None), as pairs in a new tuple (the
 * empty one when there are none); NULL with an exception. What a queued call gives its
 * Event to (tensors_hold) once it returns: a capsule's Tensor, borrowed from the
 * capsule's view, may go with that view before then. */
PyObject* imports_viewed(const Imported* imports, Py_ssize_t count);
/* 0 when dst may be written, else -1 with copy's READ_ONLY exception naming `context`
 * and the destination's `role`, and why it is read-only. */
int refuse_read_only(const DLManagedTensorVersioned* dst, const char* context, const char* role);
/* Whether `t->shape` may be read for its `ndim` extents. */
int has_readable_shape(const DLTensor* t);

/* ---------------------------------------------------------- queue.c */

/* Reads the library's device kinds once, at import: which memory the host reads in
 * place, and which queue orders each kind's work. 0, or -1 with an exception. */
int kinds_init(void);
/* The kind table's ABR_KIND_* flags of a device type; 0 for one it does not know. */
uint32_t kind_flags(DLDeviceType type);
/* With ABR_KIND_DLPACK_STREAMS: the DLPack value of the type's default stream. */
uint32_t kind_default_stream(DLDeviceType type);
/* Whether DLPack's stream values name the device's queues (a stream= applies). */
static inline int has_dlpack_streams(DLDevice device) {
  return (kind_flags(device.device_type) & ABR_KIND_DLPACK_STREAMS) != 0;
}
int on_device(DLDevice a, DLDevice b);
/* The device whose queue orders a transfer between `src` and `dst` (a side with
 * DLPack streams, else a queued side, the destination when both are alike): 1 with
 * *out set, 0 when neither side queues work. */
int queue_side(DLDevice src, DLDevice dst, DLDevice* out);
/* Where non_blocking work goes when the caller names no stream: the default DLPack
 * stream of the queue side (*stream), or the runtime's own queue there (*own);
 * nothing for host memory. 0, or -1 with an exception. */
int default_queue(abr_runtime* runtime, DLDevice src, DLDevice dst, uintptr_t* stream, abr_stream** own);
/* Waits for the queued work still filling a source (a non_blocking Tensor). */
abr_status wait_until_filled(abr_event* after, DLDevice where, abr_stream* stream);
/* An event after the work queued so far on a producer's stream, for a view of its memory. */
abr_status after_producer(abr_runtime* runtime, DLDevice device, uintptr_t stream, abr_event** done);
/* Waits for each distinct producer stream of `imports`; the GIL must be released. */
abr_status wait_for_producers(abr_runtime* runtime, const Imported* imports, DLManagedTensorVersioned** tensors,
                              Py_ssize_t n);
/* After queued work: an Event the Tensor or the caller holds (*out), or nothing when
 * it is complete already. 0, or -1 with an exception: the work's failure. */
int hold_completion(abr_event* done, PyObject* keep, const char* context, PyObject** out);

/* ---------------------------------------------------------- transfer.c, transfer_many.c */

/* A parsed request. Everything that can fail is parsed before the source is
 * consumed, so a bad argument leaves the caller's object untouched. */
typedef struct {
  int has_dst; /* 0: keep the source's device */
  DLDevice dst;
  abr_transfer_options options;
  uintptr_t stream; /* a native stream of the queue side (DLPack's value), 0 for none */
  int non_blocking; /* return once the work is queued: the Tensor holds its Event */
  const char* context;
} Request;
void init_request(Request* request, const char* context);
void raise_error(abr_status status, const Request* request);
/* Host copies this small keep the GIL: releasing and retaking it (and deferring the
 * producer's deleter to a pending call) costs more than such a copy, which is over
 * well within a switch interval. */
#define HOLD_GIL_HOST_BYTES (1u << 20)
int is_small_host_copy(const DLTensor* src, DLDevice dst, uintptr_t stream);
/* 1 for a structure of arrays: a list, tuple or mapping, subclasses included. */
int is_structure(PyObject* x);
PyObject* core_to_device(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* core_to_device_many(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* core_is_flat(PyObject* module, PyObject* list);
PyObject* core_copy_many(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* core_from_dlpack(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* core_transfer(PyObject* module, PyObject* const* args, Py_ssize_t nargs);
PyObject* core_copy(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* core_vet_destination(PyObject* module, PyObject* const* args, Py_ssize_t nargs);
PyObject* core_wrote(PyObject* module, PyObject* tensor);
extern const char core_to_device_doc[];
extern const char core_to_device_many_doc[];
extern const char core_copy_many_doc[];
extern const char core_from_dlpack_doc[];
extern const char core_copy_doc[];

/* ---------------------------------------------------------- ndarray.c */

/* A numpy.ndarray's header as NumPy's __dlpack__ would make it, read through the
 * buffer protocol: 1 with *out set (versioned, its deleter safe on any thread), 0
 * for an array NumPy's export refuses or that this does not read (left to
 * __dlpack__, which says why), -1 with an exception (no memory). */
int import_ndarray(PyObject* array, Imported* out);
/* Any array in host memory through the buffer protocol (JAX's on the CPU), its view
 * held until the header is deleted: 1 with *out set, 0 where it gives none this reads
 * (left to __dlpack__), -1 with an exception (no memory). */
int import_host_buffer(PyObject* array, Imported* out);

/* ---------------------------------------------------------- torch.c */

/* Vets a PyTorch tensor. 0 with *replacement NULL: import x as it is; with
 * *replacement set: import that new reference instead (x's conj/neg bits resolved
 * into a copy). *autograd: x requires grad (imported read-only). -1 with the
 * package's exception when x cannot serve `purpose`. may_be_conjugate 0: x's dtype
 * is not complex, so it has no conjugate bit (torch sets it on complex tensors only). */
int torch_vet(PyObject* x, const char* role, ImportPurpose purpose, int may_be_conjugate, PyObject** replacement,
              int* autograd);
/* -1 with the refusal of a torch tensor whose export has no data but elements (a
 * wrapper subclass without storage of its own: a FakeTensor, a tensor of tensors). */
int torch_refuse_storageless(PyObject* x, const char* role);
/* 0 when torch lets x (the write's `role`) be written in place, or -1 with an
 * exception (an inference tensor outside inference mode, which torch refuses to update). */
int torch_may_write(PyObject* x, const char* role);
/* Tells autograd that the `written` torch tensors of n destinations were written
 * behind torch's back (their version counters go up), unless `status` says the call
 * was refused before anything moved: 0, or -1 with an exception. */
int torch_tell_written(const Imported* destinations, Py_ssize_t n, abr_status status);
/* A Tensor just made from `src`, its report's path set: it keeps src's torch twin
 * when it views that memory writable (the path says it is the source's memory). */
void keep_torch_twin(PyObject* tensor, const Imported* src);

/* ---------------------------------------------------------- ipc.c */

PyObject* core_ipc_export(PyObject* module, PyObject* const* args, Py_ssize_t nargs);
PyObject* core_ipc_import(PyObject* module, PyObject* data);

#endif
