#include "cuda/stream.hpp"

#include "lib/base/fault.hpp"
#include "lib/base/log.hpp"

namespace abr::cuda {

std::unique_ptr<StreamEvent> create_event(const std::shared_ptr<Device>& device) {
  fault::point(ABR_ERR_BACKEND, "CUDA event");
  CUevent event = nullptr;
  device->check(device->cu().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  try {
    return std::make_unique<StreamEvent>(device, event);
  } catch (...) {  // out of host memory for its holder: the event is not lost with it
    device->cu().cuEventDestroy(event);
    throw;
  }
}

std::unique_ptr<StreamEvent> record_event(const std::shared_ptr<Device>& device, CUstream stream) {
  std::unique_ptr<StreamEvent> event = create_event(device);
  device->check(device->cu().cuEventRecord(event->get(), stream), "cuEventRecord");
  return event;
}

void order_after(const std::shared_ptr<Device>& earlier_device, CUstream earlier, Device& later_device,
                 CUstream later) {
  std::unique_ptr<StreamEvent> event;
  {
    Scope scope(*earlier_device);
    event = create_event(earlier_device);
  }
  order_after(*event, earlier, later_device, later);
}

void order_after(StreamEvent& event, CUstream earlier, Device& later_device, CUstream later) {
  {
    Scope scope(event.device());
    event.device().check(event.device().cu().cuEventRecord(event.get(), earlier), "cuEventRecord");
  }
  Scope scope(later_device);
  later_device.check(later_device.cu().cuStreamWaitEvent(later, event.get(), 0), "cuStreamWaitEvent");
}

StreamEvent::~StreamEvent() {
  device_->cu().cuEventDestroy(event_);  // after a sticky error too: it only gives back the handle
}

bool StreamEvent::complete() noexcept {
  // Failed work (a lost device) also counts as complete: nothing uses its memory any more.
  return device_->lost() || device_->cu().cuEventQuery(event_) != CUDA_ERROR_NOT_READY;
}

bool StreamEvent::query() {
  device_->require_alive();
  const CUresult status = device_->cu().cuEventQuery(event_);
  if (status == CUDA_ERROR_NOT_READY) return false;
  device_->check(status, "cuEventQuery");  // the work's sticky error: the device is lost
  return true;
}

void StreamEvent::wait() {
  device_->require_alive();
  device_->check(device_->cu().cuEventSynchronize(event_), "cuEventSynchronize");
}

CudaStream::CudaStream(std::shared_ptr<Device> device, CUstream stream, bool owned)
    : device_(std::move(device)), stream_(stream), owned_(owned) {}

CudaStream::~CudaStream() {
  if (let_go_) return;  // what the queued work uses, the stream itself included, was handed over
  // Pending work must finish before its storage (a source's deleter) is released.
  if (!device_->lost()) {
    try {
      Scope scope(*device_);
      const CUresult status = device_->cu().cuStreamSynchronize(stream_);
      if (status != CUDA_SUCCESS)
        log::warn("synchronizing a stream being destroyed failed: {}", error_text(device_->cu(), status));
      pending_.clear();
      if (owned_) device_->cu().cuStreamDestroy(stream_);
    } catch (const std::exception& e) {
      log::warn("destroying a CUDA stream: {}", e.what());
    }
  }
  // A lost device: its work will never run, so the storage is released as is.
}

void CudaStream::release_completed() {
  while (!pending_.empty() && pending_.front().first->complete()) pending_.pop_front();
}

void CudaStream::synchronize() {
  {
    Scope scope(*device_);
    device_->check(device_->cu().cuStreamSynchronize(stream_), "cuStreamSynchronize");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
}

void CudaStream::retain(std::unique_ptr<Storage> storage) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  release_completed();
  try {
    Scope scope(*device_);
    auto event = record_event(device_, stream_);
    pending_.emplace_back(std::move(event), std::move(storage));
    return;
  } catch (const std::exception& e) {
    log::debug("cannot track a stream's work ({}): waiting for it instead", e.what());
  }
  if (!device_->lost()) {  // cannot track the work: wait for it, then let go
    try {
      Scope scope(*device_);
      device_->cu().cuStreamSynchronize(stream_);
    } catch (const std::exception&) {
    }
  }
}

void CudaStream::wait_for(Stream& other) {
  auto* cuda_stream = dynamic_cast<CudaStream*>(&other);
  if (!cuda_stream) {
    other.synchronize();  // another backend's stream: wait on the host
    return;
  }
  order_after(cuda_stream->device_, cuda_stream->stream_, *device_, stream_);
}

void CudaStream::wait_for_event(Event& event) {
  auto* cuda_event = dynamic_cast<StreamEvent*>(&event);
  if (!cuda_event) {
    event.wait();  // another backend's event: wait on the host
    return;
  }
  Scope scope(*device_);  // a CUDA event orders streams of any context
  device_->check(device_->cu().cuStreamWaitEvent(stream_, cuda_event->get(), 0), "cuStreamWaitEvent");
}

namespace {

// A stream of ours handed over with its work: destroyed once that work is done.
class OwnedStream final : public Storage {
 public:
  OwnedStream(std::shared_ptr<Device> device, CUstream stream) : device_(std::move(device)), stream_(stream) {}
  ~OwnedStream() override {
    if (device_->lost()) return;
    try {
      Scope scope(*device_);
      device_->cu().cuStreamDestroy(stream_);
    } catch (const std::exception& e) {
      log::warn("destroying a CUDA stream: {}", e.what());
    }
  }

 private:
  std::shared_ptr<Device> device_;
  CUstream stream_;
};

}  // namespace

std::vector<Retained> CudaStream::let_go() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Retained> handed;
  handed.reserve(pending_.size() + 1);
  if (owned_) {  // the stream goes last, after the work queued on it (throws before anything moved)
    Scope scope(*device_);
    auto last = record_event(device_, stream_);
    handed.push_back({std::move(last), std::make_unique<OwnedStream>(device_, stream_)});
  }
  hand_over_pending(handed);
  let_go_ = true;
  return handed;
}

std::vector<Retained> CudaStream::take_retained() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Retained> handed;
  hand_over_pending(handed);
  return handed;
}

void CudaStream::hand_over_pending(std::vector<Retained>& handed) noexcept {
  try {
    handed.reserve(handed.size() + pending_.size());
  } catch (const std::bad_alloc&) {  // cannot hand them over: wait for the work, then let them go
    try {
      if (!device_->lost()) {
        Scope scope(*device_);
        device_->cu().cuStreamSynchronize(stream_);
      }
    } catch (const std::exception& e) {  // no context: the device is unusable, its work will not run
      log::warn("waiting for a stream whose storage could not be handed over: {}", e.what());
    }
    pending_.clear();
    return;
  }
  for (auto& [event, storage] : pending_) handed.push_back({std::move(event), std::move(storage)});
  pending_.clear();
}

std::unique_ptr<Event> CudaStream::record() {
  Scope scope(*device_);
  return record_event(device_, stream_);
}

std::size_t CudaStream::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

}  // namespace abr::cuda
