// The opaque handles behind abr_runtime and abr_stream. A magic number catches
// handles that are garbage or already destroyed before anything dereferences
// their contents.
#pragma once

#include <cstdint>
#include <memory>

#include "lib/run/runtime.hpp"
#include "capi/guard.hpp"

struct abr_runtime {
  static constexpr uint32_t kAlive = 0xAB7E5EED, kDead = 0xDEADAB7E;
  uint32_t magic = kAlive;
  abr::Runtime impl;
  explicit abr_runtime(const abr_runtime_options* options) : impl(options) {}
  // With the backends of a list instead of the built-in ones (a test's plug-in).
  abr_runtime(const abr_runtime_options* options, const std::vector<const abr::BackendDescriptor*>& backends)
      : impl(options, backends) {}
  ~abr_runtime() { magic = kDead; }
};

struct abr_stream {
  static constexpr uint32_t kAlive = 0xAB575EA3, kDead = 0xDEAD5753;
  uint32_t magic = kAlive;
  std::unique_ptr<abr::Stream> impl;
  // The runtime's: where abr_stream_release, and abr_event_record, leave what the stream keeps for its work.
  std::shared_ptr<abr::PendingReleases> releases;
  abr_stream(std::unique_ptr<abr::Stream> stream, std::shared_ptr<abr::PendingReleases> pending)
      : impl(std::move(stream)), releases(std::move(pending)) {}
  ~abr_stream() { magic = kDead; }
};

struct abr_event {
  static constexpr uint32_t kAlive = 0xAB5E7E47, kDead = 0xDEADE7E4;
  uint32_t magic = kAlive;
  std::unique_ptr<abr::Event> impl;  // nullptr: complete when recorded
  // The runtime's: once the event is seen complete, what released streams kept for
  // work up to it can go at once, not at the runtime's next transfer.
  std::shared_ptr<abr::PendingReleases> releases;
  abr_event(std::unique_ptr<abr::Event> event, std::shared_ptr<abr::PendingReleases> pending)
      : impl(std::move(event)), releases(std::move(pending)) {}
  ~abr_event() { magic = kDead; }
};

namespace abr::capi {

inline Runtime& runtime_of(abr_runtime* handle) {
  if (!handle) fail(ABR_ERR_INVALID_ARGUMENT, "runtime is NULL");
  if (handle->magic != abr_runtime::kAlive) fail(ABR_ERR_INVALID_ARGUMENT, "runtime handle is invalid or destroyed");
  return handle->impl;
}

// NULL is allowed where a stream is optional. One made before this process forked is refused.
inline Stream* stream_of(abr_stream* handle) {
  if (!handle) return nullptr;
  if (handle->magic != abr_stream::kAlive) fail(ABR_ERR_INVALID_ARGUMENT, "stream handle is invalid or destroyed");
  if (handle->impl->inherited()) [[unlikely]]
    refuse_inherited("this stream");
  return handle->impl.get();
}

// One made before this process forked is refused, unless its work was complete when recorded.
inline abr_event& event_of(abr_event* handle) {
  if (!handle) fail(ABR_ERR_INVALID_ARGUMENT, "event is NULL");
  if (handle->magic != abr_event::kAlive) fail(ABR_ERR_INVALID_ARGUMENT, "event handle is invalid or destroyed");
  if (handle->impl && handle->impl->inherited()) [[unlikely]]
    refuse_inherited("this event");
  return *handle;
}

}  // namespace abr::capi
