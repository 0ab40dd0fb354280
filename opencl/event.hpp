// A command's cl_event as the runtime's backend-agnostic Event (lib/devices/stream.hpp):
// what the pinned pool and the transfer pipeline wait on. It holds its context,
// so it may outlive the queue or stream that made it.
#pragma once

#include <memory>
#include <utility>

#include "lib/devices/stream.hpp"
#include "opencl/context.hpp"

namespace abr::opencl {

class CommandEvent final : public Event {
 public:
  CommandEvent(std::shared_ptr<Context> context, EventRef event)
      : context_(std::move(context)), event_(std::move(event)) {}
  bool complete() noexcept override {
    cl_int state = CL_QUEUED;
    if (context_->api().GetEventInfo(event_.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, nullptr) !=
        CL_SUCCESS)
      return true;                // an event the driver no longer knows has nothing in flight
    return state <= CL_COMPLETE;  // negative: the command failed, and nothing uses its memory any more
  }
  bool query() override {
    cl_int state = CL_QUEUED;
    check(context_->api().GetEventInfo(event_.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, nullptr),
          "clGetEventInfo");
    if (state > CL_COMPLETE) return false;
    if (state < 0) check(state, "a queued OpenCL command");  // its execution status is the error
    return true;
  }
  const Context& context() const { return *context_; }
  cl_event get() const { return event_.get(); }
  void wait() override {
    cl_event event = event_.get();
    check(context_->api().WaitForEvents(1, &event), "clWaitForEvents");
  }

 private:
  std::shared_ptr<Context> context_;
  EventRef event_;
};

}  // namespace abr::opencl
