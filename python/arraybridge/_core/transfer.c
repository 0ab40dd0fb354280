/*
 * to_device, from_dlpack, copy and the transfer under __dlpack__: import one
 * DLPack source, run one planned runtime transfer with the GIL released (or held,
 * when that is cheaper), and wrap the result in an arraybridge.Tensor. Arguments
 * other than the defaults (a dtype, a stream object, a device not seen before)
 * are parsed by the package's Python hooks.
 */
#include <string.h>

#include "core.h"

/* Lets go of an (object, Event) pair the call held, either may be NULL. */
static void let_go(PyObject* const* pair) {
  Py_XDECREF(pair[0]);
  Py_XDECREF(pair[1]);
}

void raise_error(abr_status status, const Request* request) {
  raise_status(status, request->context, request->has_dst ? &request->dst : NULL);
}

/* Logs the transfer at DEBUG through the hook, unless the logger's own cache
 * already says DEBUG is off (the cost of asking it is that of a transfer). */
static void log_transfer(PyObject* tensor, const char* context) {
  if (hooks.log_cache) {
    PyObject* enabled = PyDict_GetItemWithError(hooks.log_cache, names.debug_level);
    if (enabled == Py_False) return;
    if (!enabled) PyErr_Clear();
  }
  PyObject* done = PyObject_CallFunction(hooks.log_transfer, "Os", tensor, context);
  if (done)
    Py_DECREF(done);
  else
    hook_failed(hooks.log_transfer); /* the transfer itself succeeded */
}

/* True when the C API promises a view whatever the planner finds: the same
 * device, no forced copy, dtype or layout, no stream. The runtime still plans
 * and checks it; only the GIL is kept, since no data will move. */
static int is_view_by_contract(const Request* request, DLDevice src, DLDevice dst) {
  const abr_transfer_options* o = &request->options;
  return src.device_type == dst.device_type && src.device_id == dst.device_id && o->copy != ABR_COPY_ALWAYS &&
      o->dtype.code == 0 && o->dtype.bits == 0 && o->dtype.lanes == 0 &&
      !(o->flags & (ABR_TRANSFER_REQUIRE_CONTIGUOUS | ABR_TRANSFER_NO_NEGATIVE_STRIDES)) && !request->stream;
}

int is_small_host_copy(const DLTensor* src, DLDevice dst, uintptr_t stream) {
  if (src->device.device_type != kDLCPU || dst.device_type != kDLCPU || stream || !has_readable_shape(src)) return 0;
  uint64_t bytes = (uint64_t)dtype_item_bytes(src->dtype);
  for (int32_t i = 0; i < src->ndim && bytes <= HOLD_GIL_HOST_BYTES; ++i) bytes *= (uint64_t)src->shape[i];
  return bytes <= HOLD_GIL_HOST_BYTES;
}

void say_resolved(abr_transfer_report* report, const DLManagedTensorVersioned* out) {
  if (report->path != ABR_PATH_ZERO_COPY && report->path != ABR_PATH_HOST_WRAP) return; /* a copy says itself */
  const DLTensor* t = &out->dl_tensor;
  /* made where the source was: host memory a device wraps, or the view's own device */
  report->path =
      report->path == ABR_PATH_HOST_WRAP || t->device.device_type == kDLCPU ? ABR_PATH_HOST_COPY : ABR_PATH_DEVICE_COPY;
  report->bytes_moved = tensor_bytes(t);
  snprintf(report->detail, sizeof report->detail, "%s",
           "copied by the producer to resolve its conj/neg bits (torch's resolve_conj/resolve_neg), then viewed");
}

static PyObject* run(PyObject* x, Request* request) {
  const double start = recorder ? record_clock() : 0;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  PyTypeObject* type = (PyTypeObject*)hooks.tensor_type;
  TensorObject* result = (TensorObject*)type->tp_alloc(type, 0);
  if (!result) return NULL;
  Imported src;
  src.keep_pending = request->non_blocking;
  if (import_source(x, "x", request->options.copy == ABR_COPY_NEVER ? IMPORT_NO_COPY : IMPORT_MAY_COPY, &src) < 0) {
    Py_DECREF(result);
    return NULL;
  }
  const DLDevice src_device = imported_tensor(&src)->device;
  const int resolved = src.resolved;
  const DLDevice dst = request->has_dst ? request->dst : src_device;
  if (request->stream && !has_dlpack_streams(dst) && !has_dlpack_streams(src_device)) {
    imported_delete(&src);
    Py_DECREF(result);
    return PyErr_Format(PyExc_ValueError,
                        "arraybridge: stream= names a DLPack stream, and neither side of this %s has DLPack "
                        "streams (its work is synchronous, or on the runtime's own queue with non_blocking=True: "
                        "pass stream=None)",
                        request->context);
  }
  result->report.version = ABR_TRANSFER_REPORT_VERSION;
  request->options.report = &result->report;
  DLManagedTensorVersioned* out = NULL;
  abr_status status = ABR_OK;
  const int hold_gil = !src.after &&
      (is_view_by_contract(request, src_device, dst) ||
       is_small_host_copy(imported_tensor(&src), dst, request->stream));
  /* Data that moves waits for the producer's current stream when its exchange API
   * named one and the caller did not (the C API does not synchronize). */
  if (!hold_gil && !request->stream) request->stream = src.work_stream;
  abr_stream* own = NULL; /* with non_blocking: the queue the work goes on when none is named */
  if (!hold_gil && request->non_blocking && !request->stream &&
      default_queue(runtime, src_device, dst, &request->stream, &own) < 0) {
    imported_delete(&src);
    Py_DECREF(result);
    return NULL;
  }
  abr_event* done = NULL;
  /* The Tensor whose memory x is (x, or the Tensor a capsule of ours views) and the Event
   * the call is ordered after, held: a queued read of its capsule reads it, and the
   * capsule's view may go before we return. */
  PyObject* const held[2] = {src.viewed, src.pending_event};
  Py_XINCREF(held[0]);
  Py_XINCREF(held[1]);
  if (hold_gil) {
    /* Releasing and taking back the GIL would cost half as much as the view itself,
     * or ten times a small host copy. Holding it, the producer's tensor goes in as
     * it is: the runtime deletes a failed or copied source now, and a view's source
     * when the Tensor dies, all with the GIL. */
    const uintptr_t producer = src.work_stream;
    status = src.versioned ? abr_to_device(runtime, src.tensor, dst, &request->options, NULL, &out)
                           : abr_to_device_legacy(runtime, src.tensor, dst, &request->options, NULL, &out);
    if (status != ABR_OK) imported_delete(&src);
    if (status == ABR_OK && producer && has_dlpack_streams(src_device) &&
        (status = after_producer(runtime, src_device, producer, &done)) != ABR_OK) {
      if (out->deleter) out->deleter(out); /* the view goes, and the producer's tensor with it */
      out = NULL;
    }
  } else {
    DLManagedTensorVersioned* movable = imported_for_any_thread(&src);
    if (!movable) {
      let_go(held);
      Py_DECREF(result);
      return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    abr_stream* wrapped = NULL;
    if (request->stream)
      status = abr_stream_wrap(runtime, has_dlpack_streams(dst) ? dst : src_device, (void*)request->stream, &wrapped);
    abr_stream* stream = wrapped ? wrapped : own;
    /* A stream the caller named, other than the producer's: it waits for the producer's queued work first. */
    if (status == ABR_OK && wrapped && src.work_stream && src.work_stream != request->stream &&
        has_dlpack_streams(src_device)) {
      abr_stream* producer = NULL;
      status = abr_stream_wrap(runtime, src_device, (void*)src.work_stream, &producer);
      if (status == ABR_OK) status = abr_stream_wait(wrapped, producer);
      abr_stream_release(producer); /* accepts NULL; the producer's stream stays the producer's */
    }
    if (status == ABR_OK && src.after) status = wait_until_filled(src.after, src_device, stream);
    if (status == ABR_OK) status = abr_to_device(runtime, movable, dst, &request->options, stream, &out);
    if (status == ABR_OK && request->non_blocking && stream && abr_event_record(stream, &done) != ABR_OK)
      status = abr_stream_synchronize(stream); /* no event to hold: waited for now */
    if (done)
      abr_stream_release(wrapped); /* the work goes on; the runtime keeps the source until it is done */
    else if (wrapped)
      abr_stream_destroy(wrapped);                                       /* waits for the copy queued on it */
    if (status != ABR_OK && movable->deleter) movable->deleter(movable); /* the runtime leaves a failed source to us */
    Py_END_ALLOW_THREADS
  }
  core_drain(); /* deleters that ran without the GIL queued their releases */
  if (status != ABR_OK) {
    let_go(held);
    Py_DECREF(result);
    raise_error(status, request);
    return NULL;
  }
  result->tensor = out;
  keep_torch_twin((PyObject*)result, &src);
  if (hold_completion(done, NULL, request->context, &result->ready) < 0) {
    let_go(held);
    Py_DECREF(result); /* deletes out, the work being done */
    return NULL;
  }
  tensors_hold(held, 1, result->ready); /* a Tensor read by queued work: a write into it waits for the read */
  tensor_maybe_view_of((PyObject*)result, held[0], result->report.path);
  let_go(held);
  if (resolved) say_resolved(&result->report, out);
  log_transfer((PyObject*)result, request->context);
  if (recorder && start) /* on when the call began: else its start was never read */
    record_transfer(request->context, src_device, out->dl_tensor.device, result->report.path,
                    result->report.bytes_moved, result->report.detail, 1, start);
  return (PyObject*)result;
}

/* A structure of arrays (_structure.py): a list, tuple or mapping, subclasses
 * included (a state dict is an OrderedDict); read from the type's flags, which
 * CPython sets on every subclass of collections.abc.Mapping from 3.10. */
int is_structure(PyObject* x) {
  return (Py_TYPE(x)->tp_flags &
          (Py_TPFLAGS_MAPPING | Py_TPFLAGS_LIST_SUBCLASS | Py_TPFLAGS_TUPLE_SUBCLASS | Py_TPFLAGS_DICT_SUBCLASS)) != 0;
}

void init_request(Request* request, const char* context) {
  memset(request, 0, sizeof *request);
  request->options.version = ABR_TRANSFER_OPTIONS_VERSION;
  request->context = context;
}

const char core_to_device_doc[] =
    "to_device(x, device, *, copy=None, stream=None, dtype=None, host_staging=True, contiguous=False,\n"
    "          non_blocking=False, casting=None)\n--\n\n"
    "Move any DLPack array (or capsule, or Tensor) to `device`; returns a Tensor.\n\n"
    "device: \"cpu\", \"cuda:N\", \"cuda_host\", \"opencl:N\", a (DLDeviceType, id) pair or a\n"
    "Device from devices(). copy: None = a view when possible, True = always a new\n"
    "buffer, False = a view or ValueError. dtype: convert on the way. host_staging=False:\n"
    "refuse any path that stages through host memory (strict=True, its old spelling, warns). contiguous=True: a view "
    "must be compact\n"
    "row-major, else it is copied (for consumers such as JAX that take nothing else);\n"
    "contiguous=\"nonnegative\": a view may be strided but must have no negative\n"
    "stride (PyTorch holds none: a flipped view is copied compact).\n"
    "stream: for a transfer with a CUDA side, the CUDA stream whose queued work it\n"
    "follows (a DLPack stream value: 1 legacy default, 2 per-thread, or a handle;\n"
    "or a CuPy/PyTorch stream object); the result is ready when the call returns,\n"
    "unless non_blocking=True: then the call returns once the work is queued (on\n"
    "`stream`, the producer's current stream, else the legacy default stream of the\n"
    "CUDA side, or the runtime's queue of an OpenCL side). The Tensor holds the work's\n"
    "Event: t.wait() blocks until it is done, t.is_ready() asks; __dlpack__(stream=s)\n"
    "makes a consumer's CUDA stream wait for it on the device, and every other export\n"
    "(NumPy, the buffer protocol) waits on the host. x is kept alive until then.\n"
    "A view of a CUDA tensor whose framework names its current stream (through its\n"
    "exchange API) holds such an Event too, after the work queued there so far.\n"
    "When x's type has a DLPack C exchange API (PyTorch, tvm-ffi), x is taken through\n"
    "it and, with stream=None, a copy follows that framework's current stream.\n"
    "A view is read-only when x is: read-only data, JAX and TensorFlow arrays (immutable\n"
    "to their frameworks) and legacy capsules (which cannot say otherwise); a copy is\n"
    "the caller's to write. The value and dtype never change unless dtype= asks; a cast\n"
    "is exact only where the new dtype holds every value: as NumPy's astype, integers\n"
    "wrap, floats to integers saturate (NaN to 0), complex to real keeps the real part.\n"
    "casting: which casts dtype= may ask for, NumPy's names: None (\"unsafe\", astype's\n"
    "default: any), \"same_kind\" (within a kind or up: not complex to real, float to\n"
    "integer, signed to unsigned or to bool), \"safe\" (a dtype holding every value),\n"
    "\"no\"; a refused cast raises CastingError (a TypeError).\n"
    "The path taken is in `.report` and logged at DEBUG on the \"arraybridge\" logger.\n"
    "x may also be a mapping (a dict, a torch state dict), list or tuple of arrays,\n"
    "nested, subclasses included: the same structure comes back, of the same type\n"
    "where it can be rebuilt, every array moved by one batch (see to_device_many); a\n"
    "failure names the array's place in it (x['fc.weight']).";

PyObject* core_to_device(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"x",          "device",       "copy",   "stream", "dtype", "host_staging",
                                       "contiguous", "non_blocking", "strict", "casting"};
  static PyObject* interned[10];
  PyObject* a[10];
  if (hooks_ready() < 0 || parse_arguments("to_device", args, nargs, kwnames, kNames, interned, 10, 2, 2, a) < 0)
    return NULL;
  /* A structure of arrays (nested lists, tuples, mappings) moves in one batch, rebuilt in Python. */
  if (is_structure(a[0])) return PyObject_Vectorcall(hooks.to_device_structure, args, (size_t)nargs, kwnames);
  Request request;
  init_request(&request, "to_device");
  request.has_dst = 1;
  if (parse_device(a[1], &request.dst) < 0 || parse_copy(a[2], &request.options.copy) < 0 ||
      parse_stream(a[3], &request.stream) < 0 || parse_dtype(a[4], &request.options.dtype) < 0 ||
      parse_host_staging(a[5], a[8], "to_device", &request.options.flags) < 0 ||
      parse_contiguous(a[6], &request.options.flags) < 0 ||
      parse_truth(a[7], "non_blocking", &request.non_blocking) < 0 || parse_casting(a[9], &request.options.casting) < 0)
    return restated("to_device");
  PyObject* result = run(a[0], &request);
  return result ? result : restated("to_device");
}

const char core_from_dlpack_doc[] =
    "from_dlpack(x, *, device=None, copy=None)\n--\n\n"
    "Import any DLPack producer or capsule as a Tensor: zero-copy on its own device,\n"
    "or moved to `device`; copy as in to_device.";

PyObject* core_from_dlpack(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"x", "device", "copy"};
  static PyObject* interned[3];
  PyObject* a[3];
  if (hooks_ready() < 0 || parse_arguments("from_dlpack", args, nargs, kwnames, kNames, interned, 3, 1, 1, a) < 0)
    return NULL;
  Request request;
  init_request(&request, "from_dlpack");
  if (a[1] && a[1] != Py_None) {
    request.has_dst = 1;
    if (parse_device(a[1], &request.dst) < 0) return restated("from_dlpack");
  }
  if (parse_copy(a[2], &request.options.copy) < 0) return restated("from_dlpack");
  PyObject* result = run(a[0], &request);
  return result ? result : restated("from_dlpack");
}

/* abr_copy_versioned after the producers' current streams (from their exchange
 * APIs; NULL devices: none): on the destination's, which first waits for the
 * source's, else on `own`. Without `done` destroying the wrapped streams waits for
 * the copy; with it (non_blocking) *done is an event after the copy, or NULL when
 * the copy was waited for, and so is *tensors_done (when asked: tensors_hold's). */
static abr_status copy_following(abr_runtime* runtime, DLManagedTensorVersioned* src, DLManagedTensorVersioned* dst,
                                 const abr_transfer_options* options, const DLDevice* src_device, uintptr_t src_stream,
                                 const DLDevice* dst_device, uintptr_t dst_stream, abr_stream* own, abr_event** done,
                                 abr_event** tensors_done) {
  abr_stream *after_src = NULL, *after_dst = NULL;
  abr_status status = ABR_OK;
  if (src_device) status = abr_stream_wrap(runtime, *src_device, (void*)src_stream, &after_src);
  if (status == ABR_OK && dst_device) status = abr_stream_wrap(runtime, *dst_device, (void*)dst_stream, &after_dst);
  if (status == ABR_OK && after_src && after_dst) status = abr_stream_wait(after_dst, after_src);
  abr_stream* stream = after_dst ? after_dst : after_src ? after_src : own;
  if (status == ABR_OK) status = abr_copy_versioned(runtime, src, dst, options, stream);
  if (status == ABR_OK && done && stream && abr_event_record(stream, done) != ABR_OK)
    status = abr_stream_synchronize(stream);
  if (status == ABR_OK && done && *done && tensors_done && abr_event_record(stream, tensors_done) != ABR_OK)
    status = abr_stream_synchronize(stream); /* done: nothing for a Tensor to wait for */
  void (*let_go)(abr_stream*) = done && *done ? abr_stream_release : abr_stream_destroy;
  let_go(after_dst);
  let_go(after_src);
  return status;
}

const char core_copy_doc[] =
    "copy(src, dst, *, host_staging=True, non_blocking=False, casting=None)\n--\n\n"
    "Copy the elements of src into the existing array dst, in place: the same shape,\n"
    "any strides on either side, a dtype difference converted as casting allows (None:\n"
    "\"same_kind\", as NumPy's copyto: float64 into float32 or int64 into int8 converts,\n"
    "as astype does, while complex into float, float into int, signed into unsigned and\n"
    "anything but bool into bool raise CastingError; \"unsafe\" converts those too,\n"
    "\"safe\" only into a dtype holding every value, \"no\" none). Both are any DLPack\n"
    "producers (or capsules) and stay the caller's. This is how data reaches memory\n"
    "another library owns, such as a buffer in pyclesperanto's OpenCL context.\n"
    "host_staging=False: refuse any path that stages through host memory (the planner\n"
    "decides; strict=True is its old spelling, which warns).\n"
    "src and dst may also be structures of the same shape (nested mappings, lists and\n"
    "tuples of arrays, a state dict; a mapping's items paired by key, in any order):\n"
    "every pair is copied in one batch (see copy_many).\n"
    "A torch destination's version counter is bumped, as torch's in-place ops do, so\n"
    "a backward pass that saved it raises instead of using the new values; so is the\n"
    "torch tensor whose memory a Tensor destination views (to_device(x.detach(), \"cpu\")).\n"
    "A copy refused before anything moves (a cast, a shape) leaves the counter alone.\n"
    "A torch tensor made under torch.inference_mode() is refused outside it, as torch\n"
    "refuses in-place updates to it.\n"
    "non_blocking: return once the copy is queued, with an Event to wait on (None when\n"
    "it is done already); both arrays are kept alive until then. A copy with a CUDA\n"
    "side is queued on the producer's current stream, else the legacy default stream;\n"
    "one with an OpenCL side on the runtime's queue of that device.";

PyObject* core_copy(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  (void)module;
  static const char* const kNames[] = {"src", "dst", "host_staging", "non_blocking", "strict", "casting"};
  static PyObject* interned[6];
  PyObject* a[6];
  if (hooks_ready() < 0 || parse_arguments("copy", args, nargs, kwnames, kNames, interned, 6, 2, 2, a) < 0) return NULL;
  /* Structures of arrays (nested lists, tuples, mappings) copy in one batch, matched in Python. */
  if (is_structure(a[0])) return PyObject_Vectorcall(hooks.copy_structure, args, (size_t)nargs, kwnames);
  abr_transfer_options options;
  memset(&options, 0, sizeof options);
  options.version = ABR_TRANSFER_OPTIONS_VERSION;
  int non_blocking = 0;
  if (parse_host_staging(a[2], a[4], "copy", &options.flags) < 0 ||
      parse_truth(a[3], "non_blocking", &non_blocking) < 0 || parse_casting(a[5], &options.casting) < 0)
    return restated("copy");
  const double start = recorder ? record_clock() : 0;
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT; /* asked for only by a recording */
  if (recorder) options.report = &report;
  abr_runtime* runtime = core_runtime();
  if (!runtime) return NULL;
  Imported dst_source = {0}, src_source = {0};
  if (import_source(a[1], "dst", IMPORT_DESTINATION, &dst_source) < 0) return restated("copy");
  DLManagedTensorVersioned* dst = imported_for_any_thread(&dst_source);
  if (!dst) return restated("copy");
  DLManagedTensorVersioned* src =
      import_source(a[0], "src", IMPORT_MAY_COPY, &src_source) < 0 ? NULL : imported_for_any_thread(&src_source);
  abr_status status = ABR_OK;
  abr_event *done = NULL, *tensors_done = NULL;
  /* The Tensors whose memory src and dst are (themselves, or those capsules of ours
   * view) and the Events the copy is ordered after, held: queued work gives the Tensors
   * its Event, and a capsule's view goes first. */
  PyObject* const arrays[4] = {src_source.viewed, src_source.pending_event, dst_source.viewed,
                               dst_source.pending_event};
  for (int i = 0; i < 4; ++i) Py_XINCREF(arrays[i]);
  const int tensors = non_blocking && any_tensor(arrays, 2);
  const DLDevice dst_device = dst->dl_tensor.device;
  const DLDevice src_device = src ? src->dl_tensor.device : dst_device;
  if (src) {
    uintptr_t src_stream = src_source.work_stream, dst_stream = dst_source.work_stream;
    abr_stream* own = NULL;
    if (non_blocking && !src_stream && !dst_stream) {
      uintptr_t value = 0; /* the default DLPack stream of the side default_queue picked */
      if (default_queue(runtime, src_device, dst_device, &value, &own) < 0)
        status = ABR_ERR_INVALID_ARGUMENT;
      else if (value && has_dlpack_streams(dst_device))
        dst_stream = value;
      else
        src_stream = value;
    }
    if (status != ABR_OK) {
      /* default_queue raised */
    } else if (!non_blocking && is_small_host_copy(&src->dl_tensor, dst_device, src_stream | dst_stream)) {
      status = abr_copy_versioned(runtime, src, dst, &options, NULL);
    } else {
      Py_BEGIN_ALLOW_THREADS
      status = copy_following(runtime, src, dst, &options, src_stream ? &src_device : NULL, src_stream,
                              dst_stream ? &dst_device : NULL, dst_stream, own, non_blocking ? &done : NULL,
                              tensors ? &tensors_done : NULL);
      Py_END_ALLOW_THREADS
    }
  }
  /* Autograd hears of the write before anything else can fail; a bump that fails
   * waits for queued work below, as a failed keep_views does, and raises. */
  if (src && !PyErr_Occurred() && torch_tell_written(&dst_source, 1, status) < 0 && status != ABR_OK)
    PyErr_Clear(); /* the copy's own failure says more */
  /* Queued work keeps both views (and so both arrays) until it is done: the Event holds them. */
  PyObject* both = done && !PyErr_Occurred() ? keep_views(src, dst) : NULL;
  if (done && !both) { /* no room to keep them: waited for instead */
    Py_BEGIN_ALLOW_THREADS
    abr_event_synchronize(done);
    Py_END_ALLOW_THREADS
    abr_event_destroy(done);
    done = NULL;
  }
  if (!both) {
    if (src && src->deleter) src->deleter(src); /* with the GIL held: finishes at once */
    if (dst->deleter) dst->deleter(dst);
  }
  core_drain();
  PyObject* event = NULL;
  if (!src || PyErr_Occurred()) {
    Py_XDECREF(both);
    abr_event_destroy(tensors_done); /* never waits */
    restated("copy");
    goto done;
  }
  if (status != ABR_OK) {
    Request request;
    init_request(&request, "copy");
    raise_error(status, &request);
    goto done;
  }
  const int held = hold_completion(done, both, "copy", &event);
  Py_XDECREF(both);
  if (held < 0) {
    abr_event_destroy(tensors_done);
    goto done;
  }
  PyObject* for_tensors = NULL;
  if (hold_for_tensors(tensors_done, "copy", &for_tensors) < 0) {
    Py_CLEAR(event);
    goto done;
  }
  tensors_hold(arrays, 2, for_tensors);
  Py_XDECREF(for_tensors);
  if (recorder && start)
    record_transfer("copy", src_device, dst_device, report.path, report.bytes_moved, report.detail, 1, start);
  if (!event) {
    event = Py_None;
    Py_INCREF(event);
  }
done:
  let_go(arrays);
  let_go(arrays + 2);
  return event;
}

/* transfer(x, dst, copy, context): for Tensor._dlpack_slow; dst a (type, id) pair. */
PyObject* core_transfer(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (hooks_ready() < 0) return NULL;
  if (nargs != 4 || !PyUnicode_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError, "transfer(x, dst, copy, context)");
    return NULL;
  }
  Request request;
  init_request(&request, PyUnicode_AsUTF8(args[3]));
  request.has_dst = 1;
  if (!request.context || unpack_pair(args[1], &request.dst) < 0 || parse_copy(args[2], &request.options.copy) < 0)
    return NULL;
  return run(args[0], &request);
}

/* For writes the runtime does not make (MPI's into a buffer arraybridge.mpi hands it):
 * x is vetted as a copy's destination is, before anything is written. */
PyObject* core_vet_destination(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (hooks_ready() < 0) return NULL;
  const char* context = nargs == 2 && PyUnicode_Check(args[1]) ? PyUnicode_AsUTF8(args[1]) : NULL;
  if (!context) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "vet_destination(x, context): context is a str");
    return NULL;
  }
  Imported imported = {0};
  if (import_source(args[0], "x", IMPORT_DESTINATION, &imported) < 0) return restated(context);
  DLManagedTensorVersioned* view = imported_for_any_thread(&imported);
  if (!view) return restated(context);
  const int refused = refuse_read_only(view, context, "x");
  if (view->deleter) view->deleter(view);
  core_drain();
  if (refused < 0) return NULL;
  Py_RETURN_NONE;
}

/* After such a write into a Tensor: autograd hears of it, as of a copy's (its torch twin's version goes up). */
PyObject* core_wrote(PyObject* module, PyObject* tensor) {
  (void)module;
  if (hooks_ready() < 0) return NULL;
  if (!tensor_check(tensor)) {
    PyErr_SetString(PyExc_TypeError, "wrote(tensor): an arraybridge Tensor");
    return NULL;
  }
  Imported written = {0};
  written.written = ((TensorObject*)tensor)->torch_twin;
  if (torch_tell_written(&written, 1, ABR_OK) < 0) return NULL;
  Py_RETURN_NONE;
}
