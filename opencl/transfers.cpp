#include "opencl/transfers.hpp"

#include <algorithm>

#include "lib/error.hpp"
#include "lib/dtype.hpp"
#include "lib/host_copy.hpp"
#include "lib/host_threads.hpp"
#include "opencl/event.hpp"
#include "opencl/kernels.hpp"
#include "opencl/memory.hpp"
#include "opencl/queue_stream.hpp"
#include "opencl/staging.hpp"

namespace abr::opencl {
namespace {

Context& context_of(void* context) { return *static_cast<Context*>(context); }
cl_mem mem_of(const Layout& layout) { return static_cast<cl_mem>(layout.data); }
char* host_first(const Layout& layout) { return static_cast<char*>(layout.data) + layout.byte_offset; }

// The element walk between two views of device memory (offsets in bytes).
StridedCopy walk(const Layout& src, const Layout& dst) {
  return normalize_copy(static_cast<intptr_t>(src.byte_offset), src.strides.data(), src.itemsize,
                        static_cast<intptr_t>(dst.byte_offset), dst.strides.data(), dst.itemsize, src.shape.data(),
                        src.ndim());
}

// Where a transfer's commands go: the stream's queue when it is an OpenCL stream
// of this context (the call returns at once, work in the stream's order);
// otherwise the context's own queue, waited for before the call returns.
class Submission {
 public:
  Submission(Context& context, Stream* stream) : cl_(context.api()) {
    auto* queue_stream = dynamic_cast<QueueStream*>(stream);
    if (queue_stream && queue_stream->context().handle() == context.handle()) {
      queue_ = queue_stream->queue();
      async_ = true;
    } else {
      if (stream) stream->synchronize();  // a stream elsewhere: its earlier work comes first
      queue_ = context.queue();
    }
  }
  ~Submission() {
    if (!completed_) cl_.Finish(queue_);  // an error: nothing enqueued may outlive the call
  }
  Submission(const Submission&) = delete;
  Submission& operator=(const Submission&) = delete;

  cl_command_queue queue() const { return queue_; }
  // For a single read or write: blocking when the call is synchronous, which
  // waits for it (and, the queue being in order, for all before it) directly.
  cl_bool blocking() const { return async_ ? CL_FALSE : CL_TRUE; }
  // `waited`: the last command was blocking, so nothing is left to wait for.
  void complete(bool waited = false) {
    if (async_) check(cl_.Flush(queue_), "clFlush");
    else if (!waited) drain(cl_, queue_);
    completed_ = true;
  }

 private:
  const Api& cl_;
  cl_command_queue queue_ = nullptr;
  bool async_ = false;
  bool completed_ = false;
};

void host_to_device(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  Context& context = context_of(plan.dst_context);
  const Api& cl = context.api();
  Submission submission(context, stream);
  if (src.numel > 0 && plan.move == Move::Bytes) {
    check(cl.EnqueueWriteBuffer(submission.queue(), mem_of(dst), submission.blocking(), dst.byte_offset, src.nbytes,
                                host_first(src), 0, nullptr, nullptr),
          "clEnqueueWriteBuffer");
    return submission.complete(/*waited=*/true);
  }
  if (src.numel > 0) {
    MappedView target(cl, submission.queue(), dst, /*write=*/true);
    copy_layout_in_parallel(src, host_first(src), dst.dtype, target.first_element(), dst.strides.data(),
                            plan.staging.threads);
    target.unmap();
  }
  submission.complete();
}

void device_to_host(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  Context& context = context_of(plan.src_context);
  const Api& cl = context.api();
  Submission submission(context, stream);
  if (src.numel > 0 && plan.move == Move::Bytes) {
    check(cl.EnqueueReadBuffer(submission.queue(), mem_of(src), submission.blocking(), src.byte_offset, src.nbytes,
                               host_first(dst), 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
    return submission.complete(/*waited=*/true);
  }
  if (src.numel > 0) {
    MappedView source(cl, submission.queue(), src, /*write=*/false);
    copy_layout_in_parallel(src, source.first_element(), dst.dtype, host_first(dst), dst.strides.data(),
                            plan.staging.threads);
    source.unmap();
  }
  submission.complete();
}

void device_copy(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  Context& context = context_of(plan.src_context);
  const Api& cl = context.api();
  Submission submission(context, stream);
  cl_command_queue queue = submission.queue();
  if (src.numel > 0 && plan.move == Move::Bytes) {
    check(cl.EnqueueCopyBuffer(queue, mem_of(src), mem_of(dst), src.byte_offset, dst.byte_offset, src.nbytes, 0,
                               nullptr, nullptr),
          "clEnqueueCopyBuffer");
  } else if (src.numel > 0 && plan.overlap) {  // pack into a temporary first, then scatter
    MemRef temp = context.create_buffer(CL_MEM_READ_WRITE, src.nbytes);
    const Layout packed = compact_layout(src.device, src.dtype, src.shape, temp.get());
    enqueue_strided_copy(context, queue, mem_of(src), temp.get(), walk(src, packed), src.dtype, src.dtype);
    enqueue_strided_copy(context, queue, temp.get(), mem_of(dst), walk(packed, dst), src.dtype, dst.dtype);
  } else if (src.numel > 0) {
    enqueue_strided_copy(context, queue, mem_of(src), mem_of(dst), walk(src, dst), src.dtype, dst.dtype);
  }
  submission.complete();
}

// One side of the transfer pipeline in an OpenCL context (the caller's or the
// runtime's): reads and writes of compact bytes between pinned blocks and a
// buffer, each with its event, on the submission's queue. A source the plan
// packs or converts is first walked by a kernel into a temporary; a destination
// the plan scatters lands in a temporary that finish() walks into place. Its
// pinned blocks are the context's own mapped memory.
class StagingSide final : public ChunkSide {
 public:
  StagingSide(const Plan& plan, const Layout& tensor, bool source, Stream* stream)
      : context_(context_of(source ? plan.src_context : plan.dst_context).shared_from_this()),
        submission_(*context_, stream),
        staging_(context_),
        tensor_(tensor),
        mem_(mem_of(tensor)),
        offset_(tensor.byte_offset) {
    const bool reshaped = source ? plan.pack == Step::Device : plan.scatter == Step::Device;
    if (!reshaped || tensor.numel == 0) return;
    const DLDataType bytes_dtype = source ? plan.dtype : tensor.dtype;
    temp_ = context_->create_buffer(CL_MEM_READ_WRITE, static_cast<std::size_t>(tensor.numel * itemsize(bytes_dtype)));
    temp_layout_ = compact_layout(tensor.device, bytes_dtype, tensor.shape, temp_.get());
    if (source)
      enqueue_strided_copy(*context_, submission_.queue(), mem_, temp_.get(), walk(tensor, temp_layout_), tensor.dtype,
                           bytes_dtype);
    mem_ = temp_.get();
    offset_ = 0;
    scatter_ = !source;
  }

  bool asynchronous() const override { return true; }
  std::unique_ptr<Event> read(uint64_t offset, char* block, std::size_t n) override {
    cl_event event = nullptr;
    check(cl().EnqueueReadBuffer(submission_.queue(), mem_, CL_FALSE, offset_ + offset, n, block, 0, nullptr, &event),
          "clEnqueueReadBuffer");
    return submitted(event);
  }
  std::unique_ptr<Event> write(uint64_t offset, const char* block, std::size_t n) override {
    cl_event event = nullptr;
    check(cl().EnqueueWriteBuffer(submission_.queue(), mem_, CL_FALSE, offset_ + offset, n, block, 0, nullptr, &event),
          "clEnqueueWriteBuffer");
    return submitted(event);
  }
  void finish() override {
    if (scatter_)
      enqueue_strided_copy(*context_, submission_.queue(), temp_.get(), mem_of(tensor_), walk(temp_layout_, tensor_),
                           tensor_.dtype, tensor_.dtype);
    submission_.complete();
  }
  void settle() noexcept override { cl().Finish(submission_.queue()); }
  StagingProvider* staging() override { return &staging_; }

 private:
  const Api& cl() const { return context_->api(); }
  std::unique_ptr<Event> submitted(cl_event event) {
    EventRef owned(event, cl().ReleaseEvent);
    cl().Flush(submission_.queue());  // start it now: the host waits on it next
    return std::make_unique<CommandEvent>(context_, std::move(owned));
  }

  std::shared_ptr<Context> context_;
  Submission submission_;
  MappedStagingProvider staging_;
  Layout tensor_;
  cl_mem mem_;
  uint64_t offset_;
  MemRef temp_;  // the packed source or the landing destination; freed after the queue's work (clReleaseMemObject defers)
  Layout temp_layout_;
  bool scatter_ = false;
};

}  // namespace

void execute_plan(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  switch (plan.path) {
    case ABR_PATH_HOST_TO_DEVICE: return host_to_device(plan, src, dst, stream);
    case ABR_PATH_DEVICE_TO_HOST: return device_to_host(plan, src, dst, stream);
    case ABR_PATH_DEVICE_COPY: return device_copy(plan, src, dst, stream);
    default: fail(ABR_ERR_INTERNAL, "the OpenCL backend cannot run path {}", path_name(plan.path));
  }
}

std::unique_ptr<ChunkSide> open_staging_side(const Plan& plan, const Layout& tensor, bool source, Stream* stream) {
  return std::make_unique<StagingSide>(plan, tensor, source, stream);
}

}  // namespace abr::opencl
