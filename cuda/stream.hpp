// abr_stream over a CUstream: one the runtime created (non-blocking), or a
// caller's, wrapped and never destroyed here. The DLPack stream values map to
// handles directly: 1 is CU_STREAM_LEGACY and 2 CU_STREAM_PER_THREAD, which the
// driver accepts as streams; 0 is refused (it would mean the legacy stream by
// accident). Storage handed to retain() is released once an event recorded
// after the work that used it has completed: checked on every later call, and
// at synchronize and destroy.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "lib/devices/stream.hpp"
#include "cuda/device.hpp"

namespace abr::cuda {

// An event recorded on a stream, holding its device so it may outlive the stream.
class StreamEvent final : public Event {
 public:
  StreamEvent(std::shared_ptr<Device> device, CUevent event) : device_(std::move(device)), event_(event) {}
  ~StreamEvent() override;
  bool complete() noexcept override;
  void wait() override;
  bool query() override;
  CUevent get() const { return event_; }
  Device& device() const { return *device_; }

 private:
  std::shared_ptr<Device> device_;
  CUevent event_;
};

class CudaStream final : public Stream {
 public:
  CudaStream(std::shared_ptr<Device> device, CUstream stream, bool owned);
  ~CudaStream() override;

  DLDevice device() const override { return device_->dl_device(); }
  Device& cuda_device() const { return *device_; }
  CUstream get() const { return stream_; }

  void synchronize() override;
  void retain(std::unique_ptr<Storage> storage) noexcept override;
  void wait_for(Stream& other) override;
  void wait_for_event(Event& event) override;
  std::vector<Retained> let_go() override;
  std::vector<Retained> take_retained() override;
  std::unique_ptr<Event> record() override;

  std::size_t pending() const;  // storage still waiting for its work

 private:
  void release_completed();  // caller holds mutex_
  // Moves what retain() kept, each with its event, onto `handed`; waits for the
  // stream instead when the list cannot grow (caller holds mutex_).
  void hand_over_pending(std::vector<Retained>& handed) noexcept;

  std::shared_ptr<Device> device_;
  CUstream stream_;
  bool owned_;
  bool let_go_ = false;  // let_go(): the destructor no longer waits for the queued work
  mutable std::mutex mutex_;
  std::deque<std::pair<std::unique_ptr<StreamEvent>, std::unique_ptr<Storage>>> pending_;
};

// Records an event on `stream` (the device's context must be current).
// An event of `device`'s context, not yet recorded (made before the work it will
// order, where running out of events must not leave that work unordered).
std::unique_ptr<StreamEvent> create_event(const std::shared_ptr<Device>& device);
std::unique_ptr<StreamEvent> record_event(const std::shared_ptr<Device>& device, CUstream stream);

// Work submitted to `later` (a stream of `later_device`) from now on runs after
// the work submitted to `earlier` (of `earlier_device`) so far: an event
// recorded in the one's context, waited for by the other. Events work across devices.
void order_after(const std::shared_ptr<Device>& earlier_device, CUstream earlier, Device& later_device, CUstream later);
// The same with an event made beforehand (of `earlier`'s device): it allocates nothing.
void order_after(StreamEvent& event, CUstream earlier, Device& later_device, CUstream later);

}  // namespace abr::cuda
