#include "transfers.hpp"

#include <algorithm>

#include "../lib/error.hpp"
#include "../lib/host_copy.hpp"
#include "kernels.hpp"
#include "memory.hpp"
#include "queue_stream.hpp"
#include "staging.hpp"

namespace abr::opencl {
namespace {

Context& context_of(const void* context) { return *static_cast<Context*>(const_cast<void*>(context)); }
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
  if (src.numel > 0 && plan.engine == Engine::Bytes) {
    check(cl.EnqueueWriteBuffer(submission.queue(), mem_of(dst), submission.blocking(), dst.byte_offset, src.nbytes,
                                host_first(src), 0, nullptr, nullptr),
          "clEnqueueWriteBuffer");
    return submission.complete(/*waited=*/true);
  }
  if (src.numel > 0) {
    MappedView target(cl, submission.queue(), dst, /*write=*/true);
    host_copy_layout(src, host_first(src), dst.dtype, target.first_element(), dst.strides.data());
    target.unmap();
  }
  submission.complete();
}

void device_to_host(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  Context& context = context_of(plan.src_context);
  const Api& cl = context.api();
  Submission submission(context, stream);
  if (src.numel > 0 && plan.engine == Engine::Bytes) {
    check(cl.EnqueueReadBuffer(submission.queue(), mem_of(src), submission.blocking(), src.byte_offset, src.nbytes,
                               host_first(dst), 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
    return submission.complete(/*waited=*/true);
  }
  if (src.numel > 0) {
    MappedView source(cl, submission.queue(), src, /*write=*/false);
    host_copy_layout(src, source.first_element(), dst.dtype, host_first(dst), dst.strides.data());
    source.unmap();
  }
  submission.complete();
}

void device_copy(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  Context& context = context_of(plan.src_context);
  const Api& cl = context.api();
  Submission submission(context, stream);
  cl_command_queue queue = submission.queue();
  if (src.numel > 0 && plan.engine == Engine::Bytes) {
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

void wait_for_event(const Api& cl, cl_event event) { check(cl.WaitForEvents(1, &event), "clWaitForEvents"); }

// Moves `bytes` from one context's buffer to another's through two mapped
// staging blocks from the pool: the read of chunk i+1 overlaps the write of chunk i.
void bounce(Context& from, cl_mem src, uint64_t src_offset, Context& to, cl_mem dst, uint64_t dst_offset,
            uint64_t bytes, PinnedPool& pool) {
  const Api& cl = from.api();
  MappedStagingProvider staging(to.shared_from_this());
  const std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(bytes, kStagingChunk));
  PinnedBlock blocks[2];
  EventRef written[2];
  try {
    uint64_t offset = 0;
    for (int i = 0; offset < bytes; ++i) {
      const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(chunk, bytes - offset));
      const int b = i % 2;
      if (!blocks[b]) blocks[b] = pool.acquire(staging, chunk);
      if (written[b]) wait_for_event(cl, written[b].get());  // the block is free again
      check(cl.EnqueueReadBuffer(from.queue(), src, CL_TRUE, src_offset + offset, n, blocks[b].data(), 0, nullptr,
                                 nullptr),
            "clEnqueueReadBuffer");
      cl_event event = nullptr;
      check(cl.EnqueueWriteBuffer(to.queue(), dst, CL_FALSE, dst_offset + offset, n, blocks[b].data(), 0, nullptr,
                                  &event),
            "clEnqueueWriteBuffer");
      written[b] = EventRef(event, cl.ReleaseEvent);
      cl.Flush(to.queue());
      offset += n;
    }
    drain(cl, to.queue());
  } catch (...) {  // nothing may still use the blocks when they are freed
    cl.Finish(from.queue());
    cl.Finish(to.queue());
    throw;
  }
}

void staged_copy(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, PinnedPool& pool) {
  Context& from = context_of(plan.src_context);
  Context& to = context_of(plan.dst_context);
  if (stream) stream->synchronize();  // staging waits on the host anyway: start after the stream's work
  if (src.numel == 0) return;
  const uint64_t bytes = src.numel * dst.itemsize;

  // On the source side: compact bytes in the target dtype.
  MemRef packed;
  cl_mem source = mem_of(src);
  uint64_t source_offset = src.byte_offset;
  if (!src.compact || plan.cast) {
    packed = from.create_buffer(CL_MEM_READ_WRITE, bytes);
    const Layout target = compact_layout(src.device, dst.dtype, src.shape, packed.get());
    enqueue_strided_copy(from, from.queue(), source, packed.get(), walk(src, target), src.dtype, dst.dtype);
    source = packed.get();
    source_offset = 0;
  }
  // On the destination side: straight into dst when it is compact, else into a
  // compact landing buffer that a kernel scatters.
  MemRef landing;
  cl_mem target = mem_of(dst);
  uint64_t target_offset = dst.byte_offset;
  if (!dst.compact) {
    landing = to.create_buffer(CL_MEM_READ_WRITE, bytes);
    target = landing.get();
    target_offset = 0;
  }
  bounce(from, source, source_offset, to, target, target_offset, bytes, pool);
  if (landing) {
    const Layout landed = compact_layout(dst.device, dst.dtype, dst.shape, landing.get());
    enqueue_strided_copy(to, to.queue(), landing.get(), mem_of(dst), walk(landed, dst), dst.dtype, dst.dtype);
    drain(to.api(), to.queue());
  }
}

}  // namespace

void execute_plan(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, PinnedPool& pool) {
  switch (plan.path) {
    case ABR_PATH_HOST_TO_DEVICE: return host_to_device(plan, src, dst, stream);
    case ABR_PATH_DEVICE_TO_HOST: return device_to_host(plan, src, dst, stream);
    case ABR_PATH_DEVICE_COPY: return device_copy(plan, src, dst, stream);
    case ABR_PATH_STAGED: return staged_copy(plan, src, dst, stream, pool);
    default: fail(ABR_ERR_INTERNAL, "the OpenCL backend cannot run path {}", path_name(plan.path));
  }
}

}  // namespace abr::opencl
