// Stream and event entry points.
#include "capi/handles.hpp"

using abr::leak_if_inherited;
using abr::capi::event_of;
using abr::capi::guarded;
using abr::capi::require_pointer;
using abr::capi::runtime_of;
using abr::capi::stream_of;

extern "C" {

abr_status abr_stream_create(abr_runtime* runtime, DLDevice device, abr_stream** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    abr::Runtime& rt = runtime_of(runtime);
    *out = new abr_stream(rt.create_stream(device), rt.pending_releases());
  });
}

abr_status abr_stream_wrap(abr_runtime* runtime, DLDevice device, void* native, abr_stream** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    abr::Runtime& rt = runtime_of(runtime);
    *out = new abr_stream(rt.wrap_stream(device, native), rt.pending_releases());
  });
}

abr_status abr_stream_synchronize(abr_stream* stream) {
  return guarded(__func__, [&] {
    require_pointer(stream_of(stream), "stream")->synchronize();
    stream->releases->collect();  // what an event recorded on it handed over
  });
}

abr_status abr_stream_wait(abr_stream* stream, abr_stream* other) {
  return guarded(__func__, [&] {
    abr::Stream* waiter = require_pointer(stream_of(stream), "stream");
    abr::Stream* signaler = require_pointer(stream_of(other), "other");
    if (waiter != signaler) waiter->wait_for(*signaler);
  });
}

void abr_stream_destroy(abr_stream* stream) {
  if (!stream || stream->magic != abr_stream::kAlive) return;
  if (leak_if_inherited(stream->impl)) {  // the parent's queue: neither waited for nor freed
    delete stream;
    return;
  }
  guarded(__func__, [&] { stream->impl->synchronize(); });  // pending work finishes first
  stream->releases->collect();                              // what an event recorded on it handed over
  delete stream;
}

void abr_stream_release(abr_stream* stream) {
  if (!stream || stream->magic != abr_stream::kAlive) return;
  if (leak_if_inherited(stream->impl)) {
    delete stream;
    return;
  }
  const abr_status handed = guarded(__func__, [&] { stream->releases->add(stream->impl->let_go()); });
  if (handed != ABR_OK) guarded(__func__, [&] { stream->impl->synchronize(); });  // could not hand over: wait
  delete stream;
}

abr_status abr_event_record(abr_stream* stream, abr_event** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    abr::Stream& recorded = *require_pointer(stream_of(stream), "stream");
    auto made = std::make_unique<abr_event>(recorded.record(), stream->releases);
    // What the stream keeps for work up to the event goes to the runtime's pending
    // releases, so it goes once this event (or a later one) is seen complete.
    stream->releases->add(recorded.take_retained());
    *out = made.release();
  });
}

abr_status abr_event_query(abr_event* event) {
  bool complete = true;
  const abr_status status = guarded(__func__, [&] {
    abr_event& e = event_of(event);
    complete = !e.impl || e.impl->query();  // throws the work's failure
    if (complete && e.releases) e.releases->collect();
  });
  return status == ABR_OK && !complete ? ABR_NOT_READY : status;
}

abr_status abr_event_synchronize(abr_event* event) {
  return guarded(__func__, [&] {
    abr_event& e = event_of(event);
    if (e.impl) e.impl->wait();
    if (e.releases) e.releases->collect();
  });
}

abr_status abr_stream_wait_event(abr_stream* stream, abr_event* event) {
  return guarded(__func__, [&] {
    abr::Stream* waiter = require_pointer(stream_of(stream), "stream");
    abr_event& e = event_of(event);
    if (e.impl) waiter->wait_for_event(*e.impl);
  });
}

void abr_event_destroy(abr_event* event) {
  if (!event || event->magic != abr_event::kAlive) return;
  leak_if_inherited(event->impl);
  delete event;
}

}  // extern "C"
