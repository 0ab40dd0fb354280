#include "lib/run/device_moves.hpp"

#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/host/host_threads.hpp"

namespace abr {
namespace {

char* host_first(const Layout& layout) { return const_cast<char*>(first_element(layout)); }

void host_to_device(const Plan& plan, const Layout& src, const Layout& dst, Submission& work) {
  const char* from = host_first(src);
  if (plan.move == Move::HostWalk)  // the host engine writes through mapped memory
    return copy_layout_in_parallel(src, from, dst.dtype, work.map(dst, /*write=*/true), dst.strides.data(),
                                   plan.staging.threads);
  const uint64_t bytes = src.numel * dst.itemsize;
  const Layout target = plan.scatter == Step::Device ? work.temporary(dst, dst.dtype) : dst;
  if (plan.pack == Step::Host) {  // packed or converted on the host into pinned memory, then one DMA
    char* block = work.pinned(static_cast<std::size_t>(bytes));
    const Layout packed = compact_layout(src.device, dst.dtype, src.shape, block);
    copy_layout_in_parallel(src, from, dst.dtype, block, packed.strides.data(), plan.staging.threads);
    from = block;
  }
  work.write(target, 0, from, static_cast<std::size_t>(bytes));
  if (plan.scatter == Step::Device) work.walk(target, dst);
}

void device_to_host(const Plan& plan, const Layout& src, const Layout& dst, Submission& work) {
  char* to = host_first(dst);
  if (plan.move == Move::HostWalk)  // the host engine reads through mapped memory
    return copy_layout_in_parallel(src, work.map(src, /*write=*/false), dst.dtype, to, dst.strides.data(),
                                   plan.staging.threads);
  const uint64_t bytes = src.numel * dst.itemsize;
  // The device side: compact bytes in the destination's dtype.
  const Layout source = plan.pack == Step::Device ? work.temporary(src, dst.dtype) : src;
  if (plan.pack == Step::Device) work.walk(src, source);
  if (plan.scatter == Step::Host) {  // landed in pinned memory, then scattered by the host engine
    char* block = work.pinned(static_cast<std::size_t>(bytes));
    work.read(source, 0, block, static_cast<std::size_t>(bytes));
    work.wait();
    const Layout landed = compact_layout(dst.device, dst.dtype, dst.shape, block);
    return copy_layout_in_parallel(landed, block, dst.dtype, to, dst.strides.data(), plan.staging.threads);
  }
  work.read(source, 0, to, static_cast<std::size_t>(bytes));
}

void device_copy(const Plan& plan, const Layout& src, const Layout& dst, Submission& work) {
  if (plan.move == Move::Bytes) return work.copy(src, dst, static_cast<std::size_t>(src.nbytes));
  if (plan.overlap) {  // packed into a temporary first, then scattered
    const Layout packed = work.temporary(src, src.dtype);
    work.walk(src, packed);
    return work.walk(packed, dst);
  }
  work.walk(src, dst);
}

class DeviceSide final : public ChunkSide {
 public:
  DeviceSide(const Plan& plan, const Layout& tensor, bool source, std::unique_ptr<Submission> work)
      : work_(std::move(work)), tensor_(tensor), bytes_(tensor) {
    const bool reshaped = source ? plan.pack == Step::Device : plan.scatter == Step::Device;
    if (!reshaped || tensor.numel == 0) return;
    bytes_ = work_->temporary(tensor, source ? plan.dtype : tensor.dtype);
    if (source) work_->walk(tensor, bytes_);
    scatter_ = !source;
  }
  bool asynchronous() const override { return true; }
  std::unique_ptr<Event> read(uint64_t offset, char* block, std::size_t n) override {
    return work_->read_chunk(bytes_, offset, block, n);
  }
  void read_now(uint64_t offset, char* block, std::size_t n) override {
    work_->read(bytes_, offset, block, n);  // blocking where the driver can: no event to wait on
    work_->wait();
  }
  std::unique_ptr<Event> write(uint64_t offset, const char* block, std::size_t n) override {
    return work_->write_chunk(bytes_, offset, block, n);
  }
  bool write_now(uint64_t offset, const char* block, std::size_t n) override {
    if (scatter_ || !work_->synchronous()) return false;  // a kernel follows, or the call returns at once
    work_->write(bytes_, offset, block, n);               // blocking where the driver can (OpenCL)
    work_->wait();
    return true;
  }
  void finish() override {
    if (scatter_) work_->walk(bytes_, tensor_);
    work_->finish();
  }
  void settle() noexcept override { work_->settle(); }
  StagingProvider* staging() override { return &work_->staging(); }
  HostRegistrar* registrar() override { return work_->registrar(); }

 private:
  std::unique_ptr<Submission> work_;
  Layout tensor_;
  Layout bytes_;  // the compact bytes chunks move: the tensor's own, or a temporary
  bool scatter_ = false;
};

class DeviceSegmentsSide final : public ChunkSide {
 public:
  DeviceSegmentsSide(std::vector<Layout> tensors, SegmentMap map, std::unique_ptr<Submission> work)
      : work_(std::move(work)), tensors_(std::move(tensors)), map_(std::move(map)) {}
  bool asynchronous() const override { return true; }
  // Every piece queued, an event only after the last: the queue runs them in order.
  std::unique_ptr<Event> read(uint64_t offset, char* block, std::size_t n) override {
    std::unique_ptr<Event> last;
    map_.for_each(offset, n, [&](std::size_t segment, uint64_t at, std::size_t in_block, std::size_t len) {
      if (in_block + len < n)
        work_->read(tensors_[segment], at, block + in_block, len);
      else
        last = work_->read_chunk(tensors_[segment], at, block + in_block, len);
    });
    return last;
  }
  std::unique_ptr<Event> write(uint64_t offset, const char* block, std::size_t n) override {
    std::unique_ptr<Event> last;
    map_.for_each(offset, n, [&](std::size_t segment, uint64_t at, std::size_t in_block, std::size_t len) {
      if (in_block + len < n)
        work_->write(tensors_[segment], at, block + in_block, len);
      else
        last = work_->write_chunk(tensors_[segment], at, block + in_block, len);
    });
    return last;
  }
  void finish() override { work_->finish(); }
  void settle() noexcept override { work_->settle(); }
  StagingProvider* staging() override { return &work_->staging(); }
  HostRegistrar* registrar() override { return work_->registrar(); }

 private:
  std::unique_ptr<Submission> work_;
  std::vector<Layout> tensors_;
  SegmentMap map_;
};

}  // namespace

void submit_device_move(const Plan& plan, const Layout& src, const Layout& dst, Submission& work) {
  if (src.numel == 0) return;
  switch (plan.path) {
    case ABR_PATH_HOST_TO_DEVICE: return host_to_device(plan, src, dst, work);
    case ABR_PATH_DEVICE_TO_HOST: return device_to_host(plan, src, dst, work);
    case ABR_PATH_DEVICE_COPY: return device_copy(plan, src, dst, work);
    default: fail(ABR_ERR_INTERNAL, "path {} is not a move inside one backend's context", path_name(plan.path));
  }
}

void run_on_device(const Plan& plan, const Layout& src, const Layout& dst, DeviceBackend& backend, DLDevice device,
                   void* context, Stream* stream) {
  if (plan.move == Move::Peer)
    return backend.peer_copy(src, dst, stream, {plan.pack == Step::Device, plan.scatter == Step::Device});
  std::unique_ptr<Submission> work = submit_routed(backend, device, context, stream);
  submit_device_move(plan, src, dst, *work);
  work->finish();
}

std::unique_ptr<Submission> submit_routed(DeviceBackend& backend, DLDevice device, void* context, Stream* stream) {
  if (stream && !backend.runs_on(*stream, device, context)) {
    stream->synchronize();  // a stream elsewhere: its earlier work comes first
    stream = nullptr;
  }
  return backend.submit(device, context, stream);
}

std::unique_ptr<ChunkSide> device_side(const Plan& plan, const Layout& tensor, bool source,
                                       std::unique_ptr<Submission> work) {
  return std::make_unique<DeviceSide>(plan, tensor, source, std::move(work));
}

std::unique_ptr<ChunkSide> device_segments_side(std::vector<Layout> tensors, SegmentMap map,
                                                std::unique_ptr<Submission> work) {
  return std::make_unique<DeviceSegmentsSide>(std::move(tensors), std::move(map), std::move(work));
}

}  // namespace abr
