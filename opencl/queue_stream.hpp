// abr_stream over an in-order cl_command_queue, created by the runtime or a
// caller's (retained while wrapped). Storage handed to retain() is released once
// a marker enqueued after the work that used it has completed: checked on every
// later call, and at synchronize and destroy.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "lib/devices/stream.hpp"
#include "opencl/context.hpp"

namespace abr::opencl {

class QueueStream final : public Stream {
 public:
  // Holds the context, so a stream may outlive the runtime that made it.
  QueueStream(std::shared_ptr<Context> context, Ref<cl_command_queue> queue);
  ~QueueStream() override;

  DLDevice device() const override { return context_->dl_device(); }
  Context& context() const { return *context_; }
  cl_command_queue queue() const { return queue_.get(); }

  void synchronize() override;
  void retain(std::unique_ptr<Storage> storage) noexcept override;
  void wait_for(Stream& other) override;
  void wait_for_event(Event& event) override;
  std::vector<Retained> let_go() override;
  std::vector<Retained> take_retained() override;
  std::unique_ptr<Event> record() override;

  // Storage still waiting for its work (for tests and statistics).
  std::size_t pending() const;

 private:
  void release_completed();  // caller holds mutex_
  // What retain() kept, each with its marker; waits for the queue instead when the
  // list cannot be made (caller holds mutex_).
  std::vector<Retained> hand_over_pending();

  std::shared_ptr<Context> context_;
  Ref<cl_command_queue> queue_;
  bool let_go_ = false;  // let_go(): the destructor no longer waits for the queued work
  mutable std::mutex mutex_;
  std::deque<std::pair<EventRef, std::unique_ptr<Storage>>> pending_;
};

}  // namespace abr::opencl
