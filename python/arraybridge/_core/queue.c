/*
 * Which queue orders a transfer's work, asked of the library's kind table (never
 * of device types by name): a stream the caller or the producer names, the
 * default stream of a side with DLPack streams, or the runtime's own queue of a
 * queued side; and the events that order readers after queued work.
 */
#include "core.h"

/* Each device type's ABR_KIND_* flags and default DLPack stream, from the library's
 * kind table: read at import and only read after (the package opens only the
 * built-in backends, whose kinds are known when the library loads). */
static struct {
  uint32_t flags;
  uint32_t default_stream;
} kinds[64];

int kinds_init(void) {
  int32_t count = 0;
  if (abr_device_kind_count(&count) != ABR_OK) {
    PyErr_SetString(PyExc_RuntimeError, "arraybridge: abr_device_kind_count failed");
    return -1;
  }
  for (int32_t i = 0; i < count; ++i) {
    abr_device_kind kind = ABR_DEVICE_KIND_INIT;
    if (abr_device_kind_get(i, &kind) == ABR_OK && (unsigned)kind.type < sizeof kinds / sizeof kinds[0]) {
      kinds[kind.type].flags = kind.flags;
      kinds[kind.type].default_stream = kind.default_stream;
    }
  }
  return 0;
}

uint32_t kind_flags(DLDeviceType type) {
  return (unsigned)type < sizeof kinds / sizeof kinds[0] ? kinds[type].flags : 0;
}

uint32_t kind_default_stream(DLDeviceType type) {
  return (unsigned)type < sizeof kinds / sizeof kinds[0] ? kinds[type].default_stream : 0;
}

int on_device(DLDevice a, DLDevice b) { return a.device_type == b.device_type && a.device_id == b.device_id; }

/* 2 for a side whose DLPack streams order its work, 1 for a side with queues of
 * the runtime's own, 0 for a side whose work is synchronous. */
static int queue_rank(DLDevice device) {
  const uint32_t flags = kind_flags(device.device_type);
  return flags & ABR_KIND_DLPACK_STREAMS ? 2 : flags & ABR_KIND_QUEUED ? 1 : 0;
}

int queue_side(DLDevice src, DLDevice dst, DLDevice* out) {
  const int to = queue_rank(dst), from = queue_rank(src);
  if (!to && !from) return 0;
  *out = to >= from ? dst : src;
  return 1;
}

/* The runtime's own queue on a device, made on first use and kept (as the runtime
 * is) until exit: where non_blocking work goes when the caller names none and the
 * device has no DLPack streams. NULL when 16 devices have one already (the work
 * then runs synchronously), or NULL with an exception. */
static abr_stream* own_queue(abr_runtime* runtime, DLDevice device) {
  static struct {
    DLDevice device;
    abr_stream* stream;
  } queues[16];
  static int count;
  for (int i = 0; i < count; ++i)
    if (on_device(queues[i].device, device)) return queues[i].stream;
  if (count == 16) return NULL;
  abr_stream* stream = NULL;
  const abr_status status = abr_stream_create(runtime, device, &stream);
  if (status != ABR_OK) {
    raise_status(status, "making a queue for non_blocking work", &device);
    return NULL;
  }
  queues[count].device = device;
  queues[count++].stream = stream;
  return stream;
}

/* Waits for the queued work still filling a source (a Tensor made with
 * non_blocking). With a stream, the device waits for it; but memory the host reads
 * in place (a queued read into page-locked memory) the host engine may read at once
 * (to convert it, or to pack a batch's block), so for that the host waits. */
abr_status wait_until_filled(abr_event* after, DLDevice where, abr_stream* stream) {
  const int host_reads = (kind_flags(where.device_type) & ABR_KIND_HOST_MEMORY) != 0;
  return stream && !host_reads ? abr_stream_wait_event(stream, after) : abr_event_synchronize(after);
}

/* An event after the work queued so far on a producer's stream (the one its
 * exchange API named), for a view of its memory: that work may still be writing it,
 * and nothing else orders a view's readers after it (torch's __dlpack__ without a
 * stream does not synchronize: its default is -1). The view holds the event, so a
 * consumer's stream waits for it on the device and a host reader on the host. */
abr_status after_producer(abr_runtime* runtime, DLDevice device, uintptr_t stream, abr_event** done) {
  abr_stream* producer = NULL;
  abr_status status = abr_stream_wrap(runtime, device, (void*)stream, &producer);
  if (status != ABR_OK) return status;
  status = abr_event_record(producer, done);
  abr_stream_release(producer); /* the producer's stream stays the producer's */
  return status;
}

/* The default stream of a side with DLPack streams is named by its value (CUDA's
 * legacy stream, 1, as torch's default stream); a side with queues of the
 * runtime's own gets one of those. */
int default_queue(abr_runtime* runtime, DLDevice src, DLDevice dst, uintptr_t* stream, abr_stream** own) {
  DLDevice side;
  if (!queue_side(src, dst, &side)) return 0;
  if (kind_flags(side.device_type) & ABR_KIND_DLPACK_STREAMS)
    *stream = kind_default_stream(side.device_type);
  else if (!(*own = own_queue(runtime, side)) && PyErr_Occurred())
    return -1;
  return 0;
}

/* After queued work: an Event the Tensor or the caller holds, or nothing when it is
 * complete already. 0, or -1 with an exception (the work waited for first): the
 * work's failure, when it failed already. */
int hold_completion(abr_event* done, PyObject* keep, const char* context, PyObject** out) {
  *out = NULL;
  if (!done) return 0;
  const abr_status asked = abr_event_query(done);
  if (asked != ABR_NOT_READY) {
    abr_event_destroy(done);
    if (asked == ABR_OK) return 0;
    raise_status(asked, context, NULL);
    return -1;
  }
  *out = event_new(done, keep);
  if (*out) return 0;
  abr_status status; /* no room for the Event: the work is waited for instead */
  Py_BEGIN_ALLOW_THREADS
  status = abr_event_synchronize(done);
  Py_END_ALLOW_THREADS
  abr_event_destroy(done);
  (void)status;
  return -1;
}

/* Waits for each distinct producer stream of `imports` (exchange APIs that
 * exported without a sync); the GIL must be released. */
abr_status wait_for_producers(abr_runtime* runtime, const Imported* imports, DLManagedTensorVersioned** tensors,
                              Py_ssize_t n) {
  abr_status status = ABR_OK;
  for (Py_ssize_t i = 0; i < n && status == ABR_OK; ++i) {
    const uintptr_t stream = imports[i].work_stream;
    Py_ssize_t seen = 0;
    while (seen < i && imports[seen].work_stream != stream) ++seen;
    if (!stream || seen < i) continue;
    abr_stream* producer = NULL;
    status = abr_stream_wrap(runtime, tensors[i]->dl_tensor.device, (void*)stream, &producer);
    if (status == ABR_OK) status = abr_stream_synchronize(producer);
    abr_stream_destroy(producer);
  }
  return status;
}
