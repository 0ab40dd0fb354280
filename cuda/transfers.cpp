#include "cuda/transfers.hpp"

#include <algorithm>
#include <cstring>
#include <deque>

#include "lib/dtype.hpp"
#include "lib/host_copy.hpp"
#include "lib/host_threads.hpp"
#include "lib/log.hpp"
#include "lib/strided.hpp"
#include "cuda/kernel_params.hpp"
#include "cuda/memory.hpp"
#include "cuda/stream.hpp"

namespace abr::cuda {
namespace {

CUdeviceptr device_first(const Layout& layout) {
  return reinterpret_cast<CUdeviceptr>(layout.data) + layout.byte_offset;
}
char* host_first(const Layout& layout) { return static_cast<char*>(layout.data) + layout.byte_offset; }

// Where a transfer's work goes: the caller's stream when it is a CUDA stream of
// this device (the call returns at once, work in the stream's order); otherwise
// the device's own stream, after the caller's stream's earlier work, waited
// for before the call returns. It owns the pinned blocks the work uses and
// gives each back to the pool ordered after that work, whatever stream ran it:
// with an event recorded behind the work, and only after the stream was
// waited for when the work is synchronous (on an error too).
class Submission {
 public:
  Submission(const std::shared_ptr<Device>& device, Stream* stream) : device_(device) {
    auto* cuda_stream = dynamic_cast<CudaStream*>(stream);
    if (cuda_stream && &cuda_stream->cuda_device() == device.get()) {
      stream_ = cuda_stream->get();
      caller_ = cuda_stream;
    } else {
      if (stream) stream->synchronize();
      stream_ = device->own_stream();
    }
  }
  ~Submission() {
    if (finished_ || device_->lost()) return;  // (a lost device runs nothing more)
    mark_blocks_used();  // an error: nothing may be reused or outlive the call before the work is done
    device_->cu().cuStreamSynchronize(stream_);
  }
  Submission(const Submission&) = delete;
  Submission& operator=(const Submission&) = delete;

  CUstream get() const { return stream_; }
  Device& device() const { return *device_; }
  // A pool block the work will use: returned to the pool after that work.
  PinnedBlock& hold(PinnedBlock block) {
    blocks_.push_back(std::move(block));
    return blocks_.back();
  }
  void finish() {
    mark_blocks_used();
    if (!caller_) device_->check(device_->cu().cuStreamSynchronize(stream_), "cuStreamSynchronize");
    finished_ = true;
  }

 private:
  void mark_blocks_used() noexcept {
    for (PinnedBlock& block : blocks_) {
      try {
        block.used_until(record_event(device_, stream_));
      } catch (const std::exception&) {  // no event: the synchronize in finish or the destructor covers it
      }
    }
  }

  std::shared_ptr<Device> device_;
  CUstream stream_ = nullptr;
  Stream* caller_ = nullptr;
  bool finished_ = false;
  std::deque<PinnedBlock> blocks_;  // a deque: references stay valid as blocks are added
};

int32_t element_kind(DLDataType t) {
  switch (t.code) {
    case kDLBool: return kBool8;
    case kDLInt: return t.bits == 8 ? kInt8 : t.bits == 16 ? kInt16 : t.bits == 32 ? kInt32 : kInt64;
    case kDLUInt: return t.bits == 8 ? kUInt8 : t.bits == 16 ? kUInt16 : t.bits == 32 ? kUInt32 : kUInt64;
    case kDLFloat: return t.bits == 16 ? kFloat16 : t.bits == 32 ? kFloat32 : kFloat64;
    case kDLBfloat: return kBFloat16;
    case kDLComplex: return t.bits == 64 ? kComplex64 : kComplex128;
    default: fail(ABR_ERR_UNSUPPORTED, "no CUDA conversion for {}", dtype_name(t));
  }
}

// The largest unit (1, 2, 4 or 8 bytes) dividing both addresses, every stride and the item size.
int unit_index(const StridedCopy& walk, CUdeviceptr src, CUdeviceptr dst, std::size_t itemsize) {
  uint64_t bits = itemsize | (src + static_cast<uint64_t>(walk.src)) | (dst + static_cast<uint64_t>(walk.dst));
  for (const Dim& dim : walk.dims) bits |= static_cast<uint64_t>(dim.ss) | static_cast<uint64_t>(dim.ds);
  for (int index = 3; index > 0; --index)
    if (bits % (1u << index) == 0) return index;
  return 0;
}

// Runs the element walk from one device view to another of the same device
// (converting when the dtypes differ) on `stream`.
void launch_walk(Device& device, CUstream stream, const Layout& src, CUdeviceptr src_base, const Layout& dst,
                 CUdeviceptr dst_base) {
  const StridedCopy walk =
      normalize_copy(static_cast<intptr_t>(src.byte_offset), src.strides.data(), src.itemsize,
                     static_cast<intptr_t>(dst.byte_offset), dst.strides.data(), dst.itemsize, src.shape.data(),
                     src.ndim());
  if (walk.empty) return;
  WalkParams params{};
  params.src_first = walk.src;
  params.dst_first = walk.dst;
  params.ndim = static_cast<int32_t>(walk.dims.size());
  params.count = 1;
  for (std::size_t k = 0; k < walk.dims.size(); ++k) {
    params.extent[k] = walk.dims[k].n;
    params.src_stride[k] = walk.dims[k].ss;
    params.dst_stride[k] = walk.dims[k].ds;
    params.count *= static_cast<uint64_t>(walk.dims[k].n);
  }
  const bool cast = !same_dtype(src.dtype, dst.dtype);
  CUfunction function;
  int32_t from = 0, to = 0;
  void* args[5] = {&src_base, &dst_base, &params, &from, &to};
  if (cast) {
    from = element_kind(src.dtype);
    to = element_kind(dst.dtype);
    function = device.kernel(kCastKernelName);
  } else {
    const int unit = unit_index(walk, src_base, dst_base, src.itemsize);
    params.units = static_cast<int32_t>(src.itemsize >> unit);
    function = device.kernel(kCopyKernelNames[unit]);
  }
  const uint64_t blocks = std::min<uint64_t>((params.count + kThreadsPerBlock - 1) / kThreadsPerBlock, 65535);
  device.check(device.cu().cuLaunchKernel(function, static_cast<unsigned>(blocks), 1, 1, kThreadsPerBlock, 1, 1, 0,
                                          stream, args, nullptr),
               cast ? "cuLaunchKernel(abr_cast)" : "cuLaunchKernel(abr_copy)");
}

// A compact device buffer of `shape` in `dtype`, allocated, used and freed on `stream`.
struct DeviceTemp {
  DeviceTemp(const std::shared_ptr<Device>& device, CUstream stream, const Layout& like, DLDataType dtype)
      : buffer(device, like.numel * itemsize(dtype), stream),
        layout(compact_layout(like.device, dtype, like.shape, reinterpret_cast<void*>(buffer.get()))) {}
  StreamBuffer buffer;
  Layout layout;
};

void host_to_device(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, Resources& with) {
  Scope scope(*with.dst_device);
  Submission submission(with.dst_device, stream);
  if (src.numel == 0) return submission.finish();
  const uint64_t bytes = src.numel * dst.itemsize;
  // The device side: dst itself, or a landing buffer a kernel scatters.
  std::unique_ptr<DeviceTemp> landing;
  CUdeviceptr target = device_first(dst);
  if (plan.scatter == Step::Device) {
    landing = std::make_unique<DeviceTemp>(with.dst_device, submission.get(), dst, dst.dtype);
    target = landing->buffer.get();
  }
  const char* from = host_first(src);
  if (plan.pack == Step::Host) {  // packed/converted on the host into pinned memory, then one DMA
    PinnedBlock& block = submission.hold(with.pool.acquire(with.pinned, static_cast<std::size_t>(bytes)));
    const Layout packed = compact_layout(src.device, dst.dtype, src.shape, block.data());
    copy_layout_in_parallel(src, from, dst.dtype, block.data(), packed.strides.data(), plan.staging.threads);
    from = block.data();
  }
  with.dst_device->check(with.dst_device->cu().cuMemcpyHtoDAsync(target, from, bytes, submission.get()),
                         "cuMemcpyHtoDAsync");
  if (landing) launch_walk(*with.dst_device, submission.get(), landing->layout, landing->buffer.get(), dst,
                           reinterpret_cast<CUdeviceptr>(dst.data));
  submission.finish();
}

void device_to_host(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, Resources& with) {
  Scope scope(*with.src_device);
  Submission submission(with.src_device, stream);
  if (src.numel == 0) return submission.finish();
  const uint64_t bytes = src.numel * dst.itemsize;
  // The device side: compact bytes in the destination's dtype.
  std::unique_ptr<DeviceTemp> packed;
  CUdeviceptr source = device_first(src);
  if (plan.pack == Step::Device) {
    packed = std::make_unique<DeviceTemp>(with.src_device, submission.get(), src, dst.dtype);
    launch_walk(*with.src_device, submission.get(), src, reinterpret_cast<CUdeviceptr>(src.data), packed->layout,
                packed->buffer.get());
    source = packed->buffer.get();
  }
  Device& device = *with.src_device;
  if (plan.scatter == Step::Host) {  // land in pinned memory, then the host engine scatters
    PinnedBlock& block = submission.hold(with.pool.acquire(with.pinned, static_cast<std::size_t>(bytes)));
    device.check(device.cu().cuMemcpyDtoHAsync(block.data(), source, bytes, submission.get()), "cuMemcpyDtoHAsync");
    device.check(device.cu().cuStreamSynchronize(submission.get()), "cuStreamSynchronize");
    const Layout landed = compact_layout(dst.device, dst.dtype, dst.shape, block.data());
    copy_layout_in_parallel(landed, block.data(), dst.dtype, host_first(dst), dst.strides.data(), plan.staging.threads);
    return submission.finish();
  }
  device.check(device.cu().cuMemcpyDtoHAsync(host_first(dst), source, bytes, submission.get()), "cuMemcpyDtoHAsync");
  submission.finish();
}

void device_copy(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, Resources& with) {
  Scope scope(*with.dst_device);
  Submission submission(with.dst_device, stream);
  Device& device = *with.dst_device;
  if (src.numel == 0) return submission.finish();
  const CUdeviceptr src_base = reinterpret_cast<CUdeviceptr>(src.data);
  const CUdeviceptr dst_base = reinterpret_cast<CUdeviceptr>(dst.data);
  if (plan.move == Move::Bytes) {
    device.check(device.cu().cuMemcpyDtoDAsync(device_first(dst), device_first(src), src.nbytes, submission.get()),
                 "cuMemcpyDtoDAsync");
  } else if (plan.overlap) {  // pack into a temporary first, then scatter
    DeviceTemp temp(with.dst_device, submission.get(), src, src.dtype);
    launch_walk(device, submission.get(), src, src_base, temp.layout, temp.buffer.get());
    launch_walk(device, submission.get(), temp.layout, temp.buffer.get(), dst, dst_base);
  } else {
    launch_walk(device, submission.get(), src, src_base, dst, dst_base);
  }
  submission.finish();
}

// Between two CUDA devices: packed on the source device when needed, one peer
// copy (the driver goes direct where peer access is on), scattered on the
// destination device when needed. The source side's temporary lives on the
// source device's stream, so the copy on the destination's stream is ordered
// after the pack, and the temporary's free after the copy, by events.
void peer_copy(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, Resources& with) {
  if (stream) stream->synchronize();
  if (src.numel == 0) return;
  const uint64_t bytes = src.numel * dst.itemsize;
  Device& from = *with.src_device;
  Device& to = *with.dst_device;
  std::unique_ptr<DeviceTemp> packed;
  CUdeviceptr source = device_first(src);
  if (plan.pack == Step::Device) {
    Scope scope(from);
    packed = std::make_unique<DeviceTemp>(with.src_device, from.own_stream(), src, dst.dtype);
    launch_walk(from, from.own_stream(), src, reinterpret_cast<CUdeviceptr>(src.data), packed->layout,
                packed->buffer.get());
    source = packed->buffer.get();
    order_after(with.src_device, from.own_stream(), to, to.own_stream());
  }
  Scope scope(to);
  // Made before the copy is queued: the packed source's free must be ordered after
  // the copy even when a later step fails, and then no event may be missing.
  std::unique_ptr<StreamEvent> copied;
  if (packed) copied = create_event(with.dst_device);
  const auto free_packed_after_copy = [&]() {
    if (!packed) return;
    order_after(*copied, to.own_stream(), from, from.own_stream());
    packed.reset();  // freed on the source's stream, after the copy
  };
  try {
    std::unique_ptr<DeviceTemp> landing;
    CUdeviceptr target = device_first(dst);
    if (plan.scatter == Step::Device) {
      landing = std::make_unique<DeviceTemp>(with.dst_device, to.own_stream(), dst, dst.dtype);
      target = landing->buffer.get();
    }
    to.check(to.cu().cuMemcpyPeerAsync(target, to.context(), source, from.context(), bytes, to.own_stream()),
             "cuMemcpyPeerAsync");
    if (landing)
      launch_walk(to, to.own_stream(), landing->layout, landing->buffer.get(), dst,
                  reinterpret_cast<CUdeviceptr>(dst.data));
  } catch (...) {
    try {
      free_packed_after_copy();
    } catch (const std::exception& e) {  // the device failed too: its memory goes with it
      log::debug("ordering the free of a packed peer source failed: {}", e.what());
    }
    throw;
  }
  free_packed_after_copy();
  if (copied) from.check(from.cu().cuStreamSynchronize(from.own_stream()), "cuStreamSynchronize");
  to.check(to.cu().cuStreamSynchronize(to.own_stream()), "cuStreamSynchronize");
}

// One side of the transfer pipeline on a CUDA device: DMA of compact bytes
// between pinned blocks and device memory on the submission's stream, an event
// after each. A source the plan packs or converts is first walked by a kernel
// into a temporary; a destination the plan scatters lands in a temporary that
// finish() walks into place. Temporaries are allocated, used and freed on that
// one stream.
class StagingSide final : public ChunkSide {
 public:
  StagingSide(const Plan& plan, const Layout& tensor, bool source, Stream* stream, std::shared_ptr<Device> device,
              StagingProvider& pinned)
      : device_(std::move(device)),
        scope_(*device_),
        submission_(device_, stream),
        pinned_(pinned),
        registrar_(device_),
        tensor_(tensor),
        bytes_(device_first(tensor)) {
    const bool reshaped = source ? plan.pack == Step::Device : plan.scatter == Step::Device;
    if (!reshaped || tensor.numel == 0) return;
    temp_ = std::make_unique<DeviceTemp>(device_, submission_.get(), tensor, source ? plan.dtype : tensor.dtype);
    if (source)
      launch_walk(*device_, submission_.get(), tensor, reinterpret_cast<CUdeviceptr>(tensor.data), temp_->layout,
                  temp_->buffer.get());
    bytes_ = temp_->buffer.get();
    scatter_ = !source;
  }

  bool asynchronous() const override { return true; }
  std::unique_ptr<Event> read(uint64_t offset, char* block, std::size_t n) override {
    device_->check(device_->cu().cuMemcpyDtoHAsync(block, bytes_ + offset, n, submission_.get()),
                   "cuMemcpyDtoHAsync");
    return record_event(device_, submission_.get());
  }
  std::unique_ptr<Event> write(uint64_t offset, const char* block, std::size_t n) override {
    device_->check(device_->cu().cuMemcpyHtoDAsync(bytes_ + offset, block, n, submission_.get()),
                   "cuMemcpyHtoDAsync");
    return record_event(device_, submission_.get());
  }
  void finish() override {
    if (scatter_)
      launch_walk(*device_, submission_.get(), temp_->layout, temp_->buffer.get(), tensor_,
                  reinterpret_cast<CUdeviceptr>(tensor_.data));
    submission_.finish();
  }
  void settle() noexcept override {
    if (!device_->lost()) device_->cu().cuStreamSynchronize(submission_.get());
  }
  StagingProvider* staging() override { return &pinned_; }
  abr::HostRegistrar* registrar() override { return &registrar_; }

 private:
  std::shared_ptr<Device> device_;
  Scope scope_;  // the device's context is current while the side lives (on the caller's thread)
  Submission submission_;
  StagingProvider& pinned_;
  HostRegistrar registrar_;
  Layout tensor_;
  CUdeviceptr bytes_;
  std::unique_ptr<DeviceTemp> temp_;  // freed on the stream, after the work that uses it
  bool scatter_ = false;
};

}  // namespace

std::unique_ptr<ChunkSide> open_staging_side(const Plan& plan, const Layout& tensor, bool source, Stream* stream,
                                             std::shared_ptr<Device> device, StagingProvider& pinned) {
  return std::make_unique<StagingSide>(plan, tensor, source, stream, std::move(device), pinned);
}

void execute_plan(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, Resources& with) {
  switch (plan.path) {
    case ABR_PATH_HOST_TO_DEVICE: return host_to_device(plan, src, dst, stream, with);
    case ABR_PATH_DEVICE_TO_HOST: return device_to_host(plan, src, dst, stream, with);
    case ABR_PATH_DEVICE_COPY: return device_copy(plan, src, dst, stream, with);
    case ABR_PATH_PEER: return peer_copy(plan, src, dst, stream, with);
    default: break;
  }
  fail(ABR_ERR_INTERNAL, "the CUDA backend cannot carry out path {}", path_name(plan.path));
}

}  // namespace abr::cuda
