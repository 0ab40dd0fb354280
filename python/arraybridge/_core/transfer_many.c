/*
 * to_device_many and copy_many: a list of sources (or pairs) imported, moved in
 * one runtime batch with the GIL released, all or nothing, a failure named by
 * its place in the list.
 */
#include <string.h>

#include "core.h"

const char core_to_device_many_doc[] =
    "to_device_many(xs, device, *, copy=None, stream=None, dtype=None, host_staging=True,\n"
    "               contiguous=False, non_blocking=False, casting=None)\n--\n\n"
    "Move every DLPack array of the list xs to `device` in one runtime call; returns\n"
    "a list of Tensors in xs's order. Small copies from host memory are packed into\n"
    "one block and moved with one copy (their Tensors share one allocation, freed\n"
    "with the last). All or nothing: on failure no Tensor is made and the message\n"
    "names the failing index. The keywords mean what they mean for to_device; with\n"
    "non_blocking=True the batch is queued on one stream (stream= where given, else the\n"
    "producers' current one, else the legacy default stream of a CUDA side or the\n"
    "runtime's queue of an OpenCL side) and every Tensor holds the batch's one Event;\n"
    "stream= alone queues it there and waits for it, as to_device's does.";

/* Deletes the first `count` imports: `movable` ones through their deleters (the
 * runtime leaves a failed batch's sources to us), the rest as imported. */
static void delete_imports(Imported* imports, DLManagedTensorVersioned** movable, Py_ssize_t count) {
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (movable[i]) {
      if (movable[i]->deleter) movable[i]->deleter(movable[i]);
    } else {
      imported_delete(&imports[i]);
    }
  }
}

/* The structure check of to_device's flat list, here: as a generator in Python it
 * cost about 300 instructions per item of a 1000-array batch, a twentieth of it. */
PyObject* core_is_flat(PyObject* module, PyObject* list) {
  (void)module;
  if (!PyList_CheckExact(list)) Py_RETURN_FALSE;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); ++i)
    if (is_structure(PyList_GET_ITEM(list, i))) Py_RETURN_FALSE;
  Py_RETURN_TRUE;
}

/* "<name>[<index>]" into `out` (32 bytes; a name of at most 8 characters), a batch
 * item's place for its errors, written by hand: snprintf cost a tenth of an import. */
static void name_place(char* out, const char* name, Py_ssize_t index) {
  size_t at = strlen(name);
  if (at > 8) at = 8;
  memcpy(out, name, at);
  out[at++] = '[';
  char digits[24];
  int length = 0;
  do digits[length++] = (char)('0' + index % 10);
  while ((index /= 10) != 0);
  while (length) out[at++] = digits[--length];
  out[at++] = ']';
  out[at] = '\0';
}

/* The pending exception of a batch item's import restated as "<place>: <message>"
 * (a producer's own refusal names no place): in its own class, with its attributes
 * (an ArrayBridgeError's status), chained to the original. Left as it is when it
 * names the place already, is Python's memory running out, or its class is not
 * made from one message. Returns -1. */
static int failed_at(const char* place) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (!value || !PyErr_GivenExceptionMatches(value, PyExc_Exception) ||
      PyErr_GivenExceptionMatches(value, PyExc_MemoryError)) { /* a SystemExit or KeyboardInterrupt goes as it is */
    PyErr_Restore(type, value, traceback);
    return -1;
  }
  PyObject* text = PyObject_Str(value);
  const char* words = text ? PyUnicode_AsUTF8(text) : NULL;
  PyObject* named = NULL;
  if (words && !strstr(words, place)) {
    static const char kPrefix[] = "arraybridge: ";
    if (strncmp(words, kPrefix, sizeof kPrefix - 1) == 0) words += sizeof kPrefix - 1;
    PyObject* message = PyUnicode_FromFormat("%s: %s", place, words);
    named = message ? PyObject_CallOneArg(type, message) : NULL;
    PyObject* attributes = named ? PyObject_GetAttrString(value, "__dict__") : NULL;
    PyObject* copied = attributes ? PyDict_Copy(attributes) : NULL;
    if (!copied || !PyObject_TypeCheck(named, (PyTypeObject*)type) ||
        PyObject_SetAttrString(named, "__dict__", copied) < 0)
      Py_CLEAR(named);
    Py_XDECREF(copied);
    Py_XDECREF(attributes);
    Py_XDECREF(message);
  }
  Py_XDECREF(text);
  PyErr_Clear(); /* whatever failed above: the original goes on as it is */
  if (!named) {
    PyErr_Restore(type, value, traceback);
    return -1;
  }
  PyException_SetCause(named, value); /* steals value */
  PyErr_Restore(type, named, traceback);
  return -1;
}

/* The stream the batch goes on, the device it is on, and whether that is the producers'
 * one current stream: the caller's (stream=), else with non_blocking the side queue_side
 * picks (a source side only when every source is on that one device). 0 with *queue 0:
 * none (the batch runs synchronously); -1 with an exception. */
static int batch_queue(abr_runtime* runtime, const Request* request, const Imported* imports, Py_ssize_t n,
                       uintptr_t* queue, uintptr_t* producers, DLDevice* queue_device, abr_stream** own) {
  *queue = *producers = 0;
  *queue_device = request->dst;
  if (n == 0 ||
      !(request->stream ||
        (request->non_blocking && queue_side(imported_tensor(&imports[0])->device, request->dst, queue_device))))
    return 0;
  if (request->stream && !has_dlpack_streams(request->dst)) *queue_device = imported_tensor(&imports[0])->device;
  int one_side = 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    const DLDevice d = imported_tensor(&imports[i])->device;
    if (!on_device(*queue_device, request->dst)) one_side = one_side && on_device(d, *queue_device);
  }
  if (request->stream && (!has_dlpack_streams(*queue_device) || !one_side)) {
    PyErr_Format(PyExc_ValueError, "arraybridge: stream= names a DLPack stream of one device, and %s: pass stream=None",
                 has_dlpack_streams(*queue_device) ? "the sources are on several devices, none the destination"
                                                   : "neither the destination nor the sources have DLPack streams");
    return -1;
  }
  *producers = imports[0].work_stream; /* the producers' current stream, when they all name the same one */
  for (Py_ssize_t i = 1; i < n; ++i) *producers = imports[i].work_stream == *producers ? *producers : 0;
  if (request->stream) {
    *queue = request->stream;
    *producers = *producers == request->stream ? *producers : 0;
    return 0;
  }
  *queue = *producers;
  if (!one_side) {
    *queue = *producers = 0;
    return 0;
  }
  if (!*queue) return default_queue(runtime, imported_tensor(&imports[0])->device, request->dst, queue, own);
  return 0;
}

PyObject* core_to_device_many(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"xs",         "device",       "copy",   "dtype",   "host_staging",
                                       "contiguous", "non_blocking", "strict", "casting", "stream"};
  static PyObject* interned[10];
  PyObject* a[10];
  if (hooks_ready() < 0 || parse_arguments("to_device_many", args, nargs, kwnames, kNames, interned, 10, 2, 2, a) < 0)
    return NULL;
  Request request;
  init_request(&request, "to_device");
  request.has_dst = 1;
  if (parse_device(a[1], &request.dst) < 0 || parse_copy(a[2], &request.options.copy) < 0 ||
      parse_dtype(a[3], &request.options.dtype) < 0 ||
      parse_host_staging(a[4], a[7], "to_device_many", &request.options.flags) < 0 ||
      parse_contiguous(a[5], &request.options.flags) < 0 ||
      parse_truth(a[6], "non_blocking", &request.non_blocking) < 0 ||
      parse_casting(a[8], &request.options.casting) < 0 || parse_stream(a[9], &request.stream) < 0)
    return restated("to_device");
  const double start = recorder ? record_clock() : 0;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  PyObject* xs = PySequence_Fast(a[0], "arraybridge: to_device_many takes a list of arrays");
  if (!xs) return restated("to_device");
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(xs);
  PyObject* results = PyList_New(n);
  Imported* imports = (Imported*)calloc((size_t)(n ? n : 1), sizeof *imports);
  DLManagedTensorVersioned** movable = (DLManagedTensorVersioned**)calloc((size_t)(n ? n : 1), sizeof *movable);
  DLManagedTensorVersioned** out = (DLManagedTensorVersioned**)calloc((size_t)(n ? n : 1), sizeof *out);
  PyTypeObject* type = (PyTypeObject*)hooks.tensor_type;
  Py_ssize_t imported = 0;
  PyObject* answer = NULL;
  PyObject* viewed = NULL; /* with non_blocking: the Tensors the sources are, given the batch's Event */
  /* Each result's path and report flags, from the batch report: most batches are small (a malloc cost 3% of two). */
  abr_path few[16];
  uint32_t few_flags[16];
  abr_path* paths = n <= 16 ? few : (abr_path*)malloc((size_t)n * sizeof *paths);
  uint32_t* flags = n <= 16 ? few_flags : (uint32_t*)malloc((size_t)n * sizeof *flags);
  if (!results || !imports || !movable || !out || !paths || !flags) {
    PyErr_NoMemory();
    goto done;
  }
  /* Every Tensor is made before any source is taken: nothing can fail after the move. */
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* tensor = type->tp_alloc(type, 0);
    if (!tensor) goto done;
    ((TensorObject*)tensor)->report.version = ABR_TRANSFER_REPORT_VERSION;
    PyList_SET_ITEM(results, i, tensor);
  }
  const ImportPurpose purpose = request.options.copy == ABR_COPY_NEVER ? IMPORT_NO_COPY : IMPORT_MAY_COPY;
  for (; imported < n; ++imported) {
    imports[imported].keep_pending = request.non_blocking;
    char role[32];
    name_place(role, "x", imported);
    if (import_source(PySequence_Fast_GET_ITEM(xs, imported), role, purpose, &imports[imported]) < 0) {
      failed_at(role);
      goto done;
    }
  }
  /* Held: a capsule's Tensor is borrowed from its view, which may go before we return. */
  if (request.non_blocking && !(viewed = imports_viewed(imports, n))) goto done;
  DLDevice imported_from = {(DLDeviceType)0, 0}; /* for a recording: the sources' one device (type 0: several) */
  for (Py_ssize_t i = 0; recorder && i < n; ++i) {
    const DLDevice d = imported_tensor(&imports[i])->device;
    if (i == 0)
      imported_from = d;
    else if (d.device_type != imported_from.device_type || d.device_id != imported_from.device_id)
      imported_from.device_type = (DLDeviceType)0;
  }
  /* Host arrays to the CPU, 1 MiB in all, move with the GIL held (as one small host
   * copy does): the producers' versioned tensors go in as they are, and their
   * deleters run here. Otherwise each is made safe to delete on any thread. */
  uint64_t host_bytes = 0;
  int hold_gil = request.dst.device_type == kDLCPU;
  for (Py_ssize_t i = 0; i < n && hold_gil; ++i) {
    const DLTensor* t = imported_tensor(&imports[i]);
    hold_gil = imports[i].versioned && is_small_host_copy(t, request.dst, 0);
    if (!hold_gil) break; /* t's shape may be unreadable */
    host_bytes += tensor_bytes(t);
  }
  hold_gil = hold_gil && host_bytes <= HOLD_GIL_HOST_BYTES;
  for (Py_ssize_t i = 0; i < n; ++i) hold_gil = hold_gil && !imports[i].work_stream && !imports[i].after;
  uintptr_t queue = 0, producers = 0; /* producers: their one current stream, when the batch runs on it */
  abr_stream* own = NULL;
  DLDevice queue_device = request.dst;
  if (batch_queue(runtime, &request, imports, n, &queue, &producers, &queue_device, &own) < 0) {
    delete_imports(imports, movable, n);
    imported = 0;
    goto done;
  }
  hold_gil = hold_gil && !queue && !own;
  for (Py_ssize_t i = 0; i < n; ++i) {
    movable[i] = hold_gil ? (DLManagedTensorVersioned*)imports[i].tensor : imported_for_any_thread(&imports[i]);
    if (!movable[i]) { /* deleted already; the later ones are not movable yet */
      for (Py_ssize_t j = i + 1; j < n; ++j) imported_delete(&imports[j]);
      imported = i;
      goto done;
    }
  }
  abr_batch_report report;
  memset(&report, 0, sizeof report);
  report.version = ABR_BATCH_REPORT_VERSION;
  report.paths = paths;
  report.result_flags = flags;
  abr_status status;
  abr_event* batch_done = NULL;
  if (hold_gil) {
    status = abr_to_device_many(runtime, movable, (size_t)n, request.dst, &request.options, NULL, out, &report);
    if (status != ABR_OK) delete_imports(imports, movable, n);
  } else {
    Py_BEGIN_ALLOW_THREADS
    abr_stream* wrapped = NULL;
    status = queue ? abr_stream_wrap(runtime, queue_device, (void*)queue, &wrapped) : ABR_OK;
    abr_stream* stream = wrapped ? wrapped : own;
    /* Arrays imported without a sync (exchange APIs) are read after the work their
     * producers' current streams had queued: each such stream is waited for once,
     * and Tensors still being filled after their work (wait_until_filled). */
    if (status == ABR_OK && !(stream && queue == producers)) status = wait_for_producers(runtime, imports, movable, n);
    for (Py_ssize_t i = 0; i < n && status == ABR_OK; ++i)
      if (imports[i].after) status = wait_until_filled(imports[i].after, imported_tensor(&imports[i])->device, stream);
    if (status == ABR_OK)
      status = abr_to_device_many(runtime, movable, (size_t)n, request.dst, &request.options, stream, out, &report);
    if (status == ABR_OK && stream && request.non_blocking && abr_event_record(stream, &batch_done) != ABR_OK)
      status = abr_stream_synchronize(stream);
    if (batch_done)
      abr_stream_release(wrapped);
    else if (wrapped)
      abr_stream_destroy(wrapped); /* waits for the batch queued on it */
    if (status != ABR_OK) delete_imports(imports, movable, n);
    Py_END_ALLOW_THREADS
  }
  imported = 0; /* consumed, or deleted just now */
  core_drain();
  if (status != ABR_OK) {
    raise_error(status, &request);
    goto done;
  }
  const size_t detail_size = strlen(report.detail) + 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    TensorObject* tensor = (TensorObject*)PyList_GET_ITEM(results, i);
    tensor->tensor = out[i];
    memcpy(tensor->report.detail, report.detail, detail_size); /* the batch's line */
    tensor->report.path = paths[i];
    tensor->report.flags = flags[i];
    if (paths[i] != ABR_PATH_ZERO_COPY && paths[i] != ABR_PATH_HOST_WRAP) /* what it wrote: all of itself */
      tensor->report.bytes_moved = tensor_bytes(&out[i]->dl_tensor);
    if (imports[i].resolved) say_resolved(&tensor->report, out[i]);
    keep_torch_twin((PyObject*)tensor, &imports[i]);
  }
  PyObject* ready = NULL; /* the batch's one Event, held by every Tensor */
  if (hold_completion(batch_done, NULL, "to_device_many", &ready) < 0) goto done; /* the results go with `results` */
  for (Py_ssize_t i = 0; ready && i < n; ++i) {
    Py_INCREF(ready);
    ((TensorObject*)PyList_GET_ITEM(results, i))->ready = ready;
  }
  if (viewed) /* Tensors read by queued work: a write into one waits for it */
    tensors_hold(PySequence_Fast_ITEMS(viewed), PyTuple_GET_SIZE(viewed) / 2, ready);
  /* A view of a Tensor: ordered as that Tensor is. Its `viewed` is borrowed, alive for a
   * view's result (which keeps its source), and read for nothing else. */
  for (Py_ssize_t i = 0; i < n; ++i) tensor_maybe_view_of(PyList_GET_ITEM(results, i), imports[i].viewed, paths[i]);
  Py_XDECREF(ready);
  if (recorder && start && n > 0)
    record_transfer("to_device_many", imported_from, request.dst, ABR_PATH_NONE, report.bytes_moved, report.detail, n,
                    start);
  answer = results;
  results = NULL;
done:
  delete_imports(imports, movable, imported);
  Py_XDECREF(viewed);
  Py_XDECREF(results);
  Py_DECREF(xs);
  if (paths != few) free(paths);
  if (flags != few_flags) free(flags);
  free(imports);
  free(movable);
  free(out);
  return answer ? answer : restated("to_device");
}

const char core_copy_many_doc[] =
    "copy_many(srcs, dsts, *, host_staging=True, non_blocking=False, casting=None)\n--\n\n"
    "copy(srcs[i], dsts[i]) for every pair of two lists of the same length, in one\n"
    "runtime call: every pair is checked before anything moves (a bad pair names its\n"
    "place and moves nothing), and the copies on one device wait for it once. casting\n"
    "as copy's. Large\n"
    "pageable arrays to or from a device (a state dict into a model's parameters)\n"
    "move through one pipeline per device, where no other pair touches their memory.\n"
    "non_blocking: return once the copies are queued, with an Event to wait on (None\n"
    "when they are done already), which keeps every array alive until then. They are\n"
    "queued on one stream, as copy queues one pair: that of the first pair's device\n"
    "side, when every pair has that device on one side; otherwise they run now.";

/* The one device of `count` tensors, for a recording; device type 0 when they differ. */
static DLDevice one_device(const DLTensor* const* tensors, Py_ssize_t count) {
  DLDevice device = tensors[0]->device;
  for (Py_ssize_t i = 1; i < count; ++i)
    if (tensors[i]->device.device_type != device.device_type || tensors[i]->device.device_id != device.device_id)
      device.device_type = (DLDeviceType)0;
  return device;
}

PyObject* core_copy_many(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"srcs", "dsts", "host_staging", "non_blocking", "strict", "casting"};
  static PyObject* interned[6];
  PyObject* a[6];
  if (hooks_ready() < 0 || parse_arguments("copy_many", args, nargs, kwnames, kNames, interned, 6, 2, 2, a) < 0)
    return NULL;
  abr_transfer_options options;
  memset(&options, 0, sizeof options);
  options.version = ABR_TRANSFER_OPTIONS_VERSION;
  int non_blocking = 0;
  if (parse_host_staging(a[2], a[4], "copy_many", &options.flags) < 0 ||
      parse_truth(a[3], "non_blocking", &non_blocking) < 0 || parse_casting(a[5], &options.casting) < 0)
    return restated("copy");
  const double start = recorder ? record_clock() : 0;
  abr_batch_report report = ABR_BATCH_REPORT_INIT; /* asked for only by a recording */
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  PyObject* srcs = PySequence_Fast(a[0], "arraybridge: copy_many takes a list of source arrays");
  if (!srcs) return restated("copy");
  PyObject* dsts = PySequence_Fast(a[1], "arraybridge: copy_many takes a list of destination arrays");
  if (!dsts) {
    Py_DECREF(srcs);
    return restated("copy");
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(srcs);
  PyObject* answer = NULL;
  Imported* imports = NULL; /* the sources, then the destinations */
  DLManagedTensorVersioned** movable = NULL;
  const DLTensor** tensors = NULL;
  PyObject* viewed = NULL;
  Py_ssize_t imported = 0;
  if (PySequence_Fast_GET_SIZE(dsts) != n) {
    PyErr_Format(PyExc_ValueError, "arraybridge: %zd sources but %zd destinations", n, PySequence_Fast_GET_SIZE(dsts));
    goto done;
  }
  imports = (Imported*)calloc((size_t)(2 * n + 1), sizeof *imports);
  movable = (DLManagedTensorVersioned**)calloc((size_t)(2 * n + 1), sizeof *movable);
  tensors = (const DLTensor**)calloc((size_t)(2 * n + 1), sizeof *tensors);
  if (!imports || !movable || !tensors) {
    PyErr_NoMemory();
    goto done;
  }
  for (; imported < 2 * n; ++imported) {
    const int source = imported < n;
    const Py_ssize_t place = source ? imported : imported - n;
    char role[32];
    name_place(role, source ? "src" : "dst", place);
    PyObject* item = PySequence_Fast_GET_ITEM(source ? srcs : dsts, place);
    if (import_source(item, role, source ? IMPORT_MAY_COPY : IMPORT_DESTINATION, &imports[imported]) < 0) {
      failed_at(role);
      goto done;
    }
    movable[imported] = imported_for_any_thread(&imports[imported]);
    if (!movable[imported]) goto done; /* deleted already */
    tensors[imported] = &movable[imported]->dl_tensor;
    if (!source && refuse_read_only(movable[imported], "copy", role) < 0) {
      ++imported; /* taken: given back below */
      goto done;
    }
  }
  /* non_blocking: one stream for every pair, on the side queue_side picks for the
   * first pair, when every pair has that device on one side; else the copies run now. */
  DLDevice queue_device = {kDLCPU, 0};
  int queued = non_blocking && n > 0 && queue_side(tensors[0]->device, tensors[n]->device, &queue_device);
  for (Py_ssize_t i = 0; queued && i < n; ++i)
    queued = on_device(tensors[i]->device, queue_device) || on_device(tensors[n + i]->device, queue_device);
  uintptr_t cuda = 0;
  abr_stream* own = NULL;
  if (queued && default_queue(runtime, tensors[0]->device, tensors[n]->device, &cuda, &own) < 0) goto done;
  abr_status status;
  abr_event* copied = NULL;       /* with non_blocking: after the copies, which the Event's caller waits for */
  abr_event* tensors_done = NULL; /* the same, for the Tensors among them (hold_for_tensors) */
  /* The Tensors whose memory the arrays are (themselves, or those capsules of ours view) */
  if (queued && !(viewed = imports_viewed(imports, 2 * n))) goto done;
  const int with_tensors = viewed && PyTuple_GET_SIZE(viewed) > 0;
  Py_BEGIN_ALLOW_THREADS
  abr_stream* wrapped = NULL;
  status = wait_for_producers(runtime, imports, movable, 2 * n);
  if (status == ABR_OK && queued && cuda) status = abr_stream_wrap(runtime, queue_device, (void*)cuda, &wrapped);
  abr_stream* stream = wrapped ? wrapped : queued ? own : NULL;
  if (status == ABR_OK)
    status = abr_copy_many(runtime, tensors, tensors + n, (size_t)n, &options, stream, recorder ? &report : NULL);
  if (status == ABR_OK && stream && abr_event_record(stream, &copied) != ABR_OK)
    status = abr_stream_synchronize(stream);
  if (status == ABR_OK && copied && with_tensors && abr_event_record(stream, &tensors_done) != ABR_OK)
    status = abr_stream_synchronize(stream);                      /* done: nothing for a Tensor to wait for */
  if (status != ABR_OK && stream) abr_stream_synchronize(stream); /* earlier pairs' work may use the views */
  if (copied)
    abr_stream_release(wrapped);
  else if (wrapped)
    abr_stream_destroy(wrapped);
  Py_END_ALLOW_THREADS
  if (torch_tell_written(imports + n, n, status) < 0) {
    if (status == ABR_OK) { /* written, but autograd could not be told: raised once the work is done */
      if (copied) {
        Py_BEGIN_ALLOW_THREADS
        abr_event_synchronize(copied);
        Py_END_ALLOW_THREADS
      }
      abr_event_destroy(copied);
      abr_event_destroy(tensors_done);
      goto done;
    }
    PyErr_Clear(); /* the copy's own failure says more */
  }
  if (status != ABR_OK) {
    Request request;
    init_request(&request, "copy");
    raise_error(status, &request);
    goto done;
  }
  PyObject* for_tensors = NULL;
  if (hold_for_tensors(tensors_done, "copy", &for_tensors) < 0) { /* the work failed: waited for */
    abr_event_destroy(copied);
    goto done;
  }
  if (viewed) tensors_hold(PySequence_Fast_ITEMS(viewed), PyTuple_GET_SIZE(viewed) / 2, for_tensors);
  Py_XDECREF(for_tensors);
  /* Queued work keeps every view (and so every array) until it is done: the Event holds them. */
  PyObject* kept = copied ? keep_many(movable, 2 * n) : NULL;
  if (copied && !kept) { /* no room to keep them: waited for instead (MemoryError raised) */
    Py_BEGIN_ALLOW_THREADS
    abr_event_synchronize(copied);
    Py_END_ALLOW_THREADS
    abr_event_destroy(copied);
    goto done;
  }
  if (kept) imported = 0; /* the Event's now */
  PyObject* event = NULL;
  const int held = hold_completion(copied, kept, "copy", &event);
  Py_XDECREF(kept);
  if (held < 0) goto done;
  if (recorder && start && n > 0)
    record_transfer("copy_many", one_device(tensors, n), one_device(tensors + n, n), ABR_PATH_NONE, report.bytes_moved,
                    report.detail, n, start);
  answer = event ? event : Py_None;
  if (!event) Py_INCREF(answer);
done:
  for (Py_ssize_t i = 0; i < imported; ++i) /* borrowed: every import goes back */
    if (movable[i] && movable[i]->deleter) movable[i]->deleter(movable[i]);
  core_drain();
  Py_XDECREF(viewed);
  Py_DECREF(srcs);
  Py_DECREF(dsts);
  free(imports);
  free(movable);
  free(tensors);
  return answer ? answer : restated("copy");
}
