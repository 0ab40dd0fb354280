#include "opencl/submission.hpp"

#include <list>

#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/host/strided.hpp"
#include "opencl/event.hpp"
#include "opencl/kernels.hpp"
#include "opencl/memory.hpp"
#include "opencl/queue_stream.hpp"
#include "opencl/staging.hpp"

namespace abr::opencl {
namespace {

cl_mem mem_of(const Layout& layout) { return static_cast<cl_mem>(layout.data); }

// The element walk between two views of device memory (offsets in bytes).
StridedCopy walk_between(const Layout& src, const Layout& dst) {
  return normalize_copy(static_cast<intptr_t>(src.byte_offset), src.strides.data(), src.itemsize,
                        static_cast<intptr_t>(dst.byte_offset), dst.strides.data(), dst.itemsize, src.shape.data(),
                        src.ndim());
}

// The caller's queue (an OpenCL stream of this context: the call returns at once,
// work in the stream's order), or the context's own queue, waited for before the
// call returns. A single read or write is blocking
// when the work is synchronous, which waits for it (and, the queue being in
// order, for all before it) directly, so finish() has nothing left to wait for.
class ClSubmission final : public Submission {
 public:
  ClSubmission(std::shared_ptr<Context> context, Stream* stream)
      : context_(std::move(context)), cl_(context_->api()), staging_(context_) {
    if (stream) {  // a queue of this context (DeviceBackend::runs_on)
      queue_ = static_cast<QueueStream*>(stream)->queue();
      async_ = true;
    } else {
      queue_ = context_->queue();
    }
  }
  ~ClSubmission() override {
    if (completed_) return;
    maps_.clear();       // an error: each view unmaps itself (queued) ...
    cl_.Finish(queue_);  // ... and nothing enqueued may outlive the call
  }
  ClSubmission(const ClSubmission&) = delete;
  ClSubmission& operator=(const ClSubmission&) = delete;

  void write(const Layout& device, uint64_t offset, const char* host, std::size_t n) override {
    unmap_pending();
    const cl_bool wait = deferred_ ? CL_FALSE : blocking();
    check(
        cl_.EnqueueWriteBuffer(queue_, mem_of(device), wait, device.byte_offset + offset, n, host, 0, nullptr, nullptr),
        "clEnqueueWriteBuffer");
    waited_ = wait == CL_TRUE;
  }
  void read(const Layout& device, uint64_t offset, char* host, std::size_t n) override {
    unmap_pending();
    const cl_bool wait = deferred_ ? CL_FALSE : blocking();
    check(
        cl_.EnqueueReadBuffer(queue_, mem_of(device), wait, device.byte_offset + offset, n, host, 0, nullptr, nullptr),
        "clEnqueueReadBuffer");
    waited_ = wait == CL_TRUE;
  }
  std::unique_ptr<Event> write_chunk(const Layout& device, uint64_t offset, const char* host, std::size_t n) override {
    unmap_pending();
    cl_event event = nullptr;
    check(cl_.EnqueueWriteBuffer(queue_, mem_of(device), CL_FALSE, device.byte_offset + offset, n, host, 0, nullptr,
                                 &event),
          "clEnqueueWriteBuffer");
    return submitted(event);
  }
  std::unique_ptr<Event> read_chunk(const Layout& device, uint64_t offset, char* host, std::size_t n) override {
    unmap_pending();
    cl_event event = nullptr;
    check(cl_.EnqueueReadBuffer(queue_, mem_of(device), CL_FALSE, device.byte_offset + offset, n, host, 0, nullptr,
                                &event),
          "clEnqueueReadBuffer");
    return submitted(event);
  }
  void copy(const Layout& from, const Layout& to, std::size_t n) override {
    unmap_pending();
    check(cl_.EnqueueCopyBuffer(queue_, mem_of(from), mem_of(to), from.byte_offset, to.byte_offset, n, 0, nullptr,
                                nullptr),
          "clEnqueueCopyBuffer");
    waited_ = false;
  }
  void walk(const Layout& src, const Layout& dst) override {
    unmap_pending();
    enqueue_strided_copy(*context_, queue_, mem_of(src), mem_of(dst), walk_between(src, dst), src.dtype, dst.dtype);
    waited_ = false;
  }
  Layout temporary(const Layout& like, DLDataType dtype) override {
    // Freed after the queue's work: clReleaseMemObject defers until then.
    const MemRef& temp = temps_.emplace_back(
        context_->create_buffer(CL_MEM_READ_WRITE, static_cast<std::size_t>(like.numel * itemsize(dtype))));
    return compact_layout(like.device, dtype, like.shape, temp.get());
  }
  char* pinned(std::size_t) override {
    fail(ABR_ERR_INTERNAL, "a plan staged OpenCL work through pinned memory; OpenCL reshapes through mapped memory");
  }
  char* map(const Layout& device, bool write) override {
    waited_ = false;  // the unmap at finish() is queued
    return maps_.emplace_back(cl_, queue_, device, write).first_element();
  }
  void wait() override {
    if (!waited_) drain(cl_, queue_);  // after a blocking read or write the in-order queue is empty
    waited_ = true;
  }
  void defer_waits() override { deferred_ = true; }
  void finish() override {
    unmap_pending();
    if (async_)
      check(cl_.Flush(queue_), "clFlush");
    else if (!waited_)
      drain(cl_, queue_);
    completed_ = true;
  }
  bool synchronous() const override { return !async_; }
  void settle() noexcept override { cl_.Finish(queue_); }
  StagingProvider& staging() override { return staging_; }

 private:
  cl_bool blocking() const { return async_ ? CL_FALSE : CL_TRUE; }
  // A mapped view is unmapped before the next command: what the host wrote there
  // is the device's before anything else on the queue reads it.
  void unmap_pending() {
    for (MappedView& view : maps_) view.unmap();
    maps_.clear();
  }
  std::unique_ptr<Event> submitted(cl_event event) {
    EventRef owned(event, cl_.ReleaseEvent);
    waited_ = false;
    cl_.Flush(queue_);  // start it now: the host waits on it next
    return std::make_unique<CommandEvent>(context_, std::move(owned));
  }

  std::shared_ptr<Context> context_;
  const Api& cl_;
  MappedStagingProvider staging_;  // the context's own mapped memory
  cl_command_queue queue_ = nullptr;
  bool async_ = false;
  bool waited_ = false;  // the last command was blocking: nothing is left to wait for
  bool completed_ = false;
  bool deferred_ = false;    // defer_waits(): reads and writes are not waited for one by one
  std::list<MemRef> temps_;  // lists: stable references, and nothing allocated while empty
  std::list<MappedView> maps_;
};

}  // namespace

std::unique_ptr<Submission> submit(std::shared_ptr<Context> context, Stream* stream) {
  return std::make_unique<ClSubmission>(std::move(context), stream);
}

}  // namespace abr::opencl
