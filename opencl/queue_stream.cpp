#include "opencl/queue_stream.hpp"

#include "lib/base/fault.hpp"
#include "lib/base/log.hpp"
#include "opencl/event.hpp"

namespace abr::opencl {
QueueStream::QueueStream(std::shared_ptr<Context> context, Ref<cl_command_queue> queue)
    : context_(std::move(context)), queue_(std::move(queue)) {}

QueueStream::~QueueStream() {
  if (let_go_) return;  // what used the queued work was handed over; releasing the queue flushes it
  // Pending work must finish before its storage (a source's deleter) is released.
  const cl_int status = context_->api().Finish(queue_.get());
  if (status != CL_SUCCESS) log::warn("clFinish while destroying a stream failed: {} ({})", error_name(status), status);
}

void QueueStream::release_completed() {
  const Api& cl = context_->api();
  while (!pending_.empty()) {
    cl_int state = CL_QUEUED;
    cl.GetEventInfo(pending_.front().first.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, nullptr);
    if (state > CL_COMPLETE) return;  // in-order queue: later markers are not done either
    pending_.pop_front();             // complete, or failed: either way nothing uses it any more
  }
}

void QueueStream::synchronize() {
  check(context_->api().Finish(queue_.get()), "clFinish");
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
}

void QueueStream::retain(std::unique_ptr<Storage> storage) noexcept {
  const Api& cl = context_->api();
  std::lock_guard<std::mutex> lock(mutex_);
  release_completed();
  cl_event marker = nullptr;
  const cl_int status = fault::fails("OpenCL event (retain)")
      ? CL_OUT_OF_HOST_MEMORY
      : cl.EnqueueMarkerWithWaitList(queue_.get(), 0, nullptr, &marker);
  if (status == CL_SUCCESS) {
    EventRef owned(marker, cl.ReleaseEvent);
    try {
      pending_.emplace_back(std::move(owned), std::move(storage));
      cl.Flush(queue_.get());
      return;
    } catch (...) {  // out of memory for the list: `owned` releases the marker; wait instead
    }
  }
  cl.Finish(queue_.get());  // cannot track the work: wait for it, then let go
}

void QueueStream::wait_for(Stream& other) {
  auto* queue_stream = dynamic_cast<QueueStream*>(&other);
  if (!queue_stream || queue_stream->context_->handle() != context_->handle()) {
    other.synchronize();  // events cannot cross contexts: wait on the host
    return;
  }
  const Api& cl = context_->api();
  fault::point(ABR_ERR_BACKEND, "OpenCL event");
  cl_event marker = nullptr;
  check(cl.EnqueueMarkerWithWaitList(queue_stream->queue(), 0, nullptr, &marker), "clEnqueueMarkerWithWaitList");
  EventRef owned(marker, cl.ReleaseEvent);
  check(cl.EnqueueBarrierWithWaitList(queue_.get(), 1, &marker, nullptr), "clEnqueueBarrierWithWaitList");
  cl.Flush(queue_stream->queue());
}

void QueueStream::wait_for_event(Event& event) {
  auto* command = dynamic_cast<CommandEvent*>(&event);
  if (!command || command->context().handle() != context_->handle()) {
    event.wait();  // events cannot cross contexts: wait on the host
    return;
  }
  cl_event after = command->get();
  check(context_->api().EnqueueBarrierWithWaitList(queue_.get(), 1, &after, nullptr), "clEnqueueBarrierWithWaitList");
}

std::vector<Retained> QueueStream::let_go() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Retained> handed = hand_over_pending();
  let_go_ = true;
  context_->api().Flush(queue_.get());
  return handed;
}

std::vector<Retained> QueueStream::take_retained() {
  std::lock_guard<std::mutex> lock(mutex_);
  return hand_over_pending();
}

std::vector<Retained> QueueStream::hand_over_pending() {
  std::vector<Retained> handed;
  try {
    handed.reserve(pending_.size());
    for (auto& [marker, storage] : pending_)
      handed.push_back({std::make_unique<CommandEvent>(context_, std::move(marker)), std::move(storage)});
  } catch (const std::bad_alloc&) {  // cannot hand the rest over: wait for the work, then let it go
    context_->api().Finish(queue_.get());
  }
  pending_.clear();
  return handed;
}

std::unique_ptr<Event> QueueStream::record() {
  const Api& cl = context_->api();
  fault::point(ABR_ERR_BACKEND, "OpenCL event");
  cl_event marker = nullptr;
  check(cl.EnqueueMarkerWithWaitList(queue_.get(), 0, nullptr, &marker), "clEnqueueMarkerWithWaitList");
  EventRef owned(marker, cl.ReleaseEvent);
  cl.Flush(queue_.get());
  return std::make_unique<CommandEvent>(context_, std::move(owned));
}

std::size_t QueueStream::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

}  // namespace abr::opencl
