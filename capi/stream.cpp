// Stream entry points.
#include "capi/handles.hpp"

using abr::capi::guarded;
using abr::capi::require_pointer;
using abr::capi::runtime_of;
using abr::capi::stream_of;

extern "C" {

abr_status abr_stream_create(abr_runtime* runtime, DLDevice device, abr_stream** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    *out = new abr_stream(runtime_of(runtime).create_stream(device));
  });
}

abr_status abr_stream_wrap(abr_runtime* runtime, DLDevice device, void* native, abr_stream** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    *out = new abr_stream(runtime_of(runtime).wrap_stream(device, native));
  });
}

abr_status abr_stream_synchronize(abr_stream* stream) {
  return guarded(__func__, [&] { require_pointer(stream_of(stream), "stream")->synchronize(); });
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
  guarded(__func__, [&] { stream->impl->synchronize(); });  // pending work finishes first
  delete stream;
}

}  // extern "C"
