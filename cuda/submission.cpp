#include "cuda/submission.hpp"

#include <list>

#include "lib/base/error.hpp"
#include "cuda/stream.hpp"
#include "cuda/walk.hpp"

namespace abr::cuda {
namespace {

CUdeviceptr device_first(const Layout& layout) {
  return reinterpret_cast<CUdeviceptr>(layout.data) + layout.byte_offset;
}
CUdeviceptr device_base(const Layout& layout) { return reinterpret_cast<CUdeviceptr>(layout.data); }

// The caller's stream (a CUDA stream of this device: the call returns at once,
// work in the stream's order), or the device's own stream, waited for before the
// call returns. It owns the pinned blocks and temporaries the work uses: each block goes back to
// the pool ordered after that work, whatever stream ran it (an event recorded
// behind the work, and only after the stream was waited for when the work is
// synchronous, on an error too); temporaries are freed on the stream.
class CudaSubmission final : public Submission {
 public:
  CudaSubmission(std::shared_ptr<Device> device, Stream* stream, PinnedPool& pool, StagingProvider& pinned)
      : device_(std::move(device)), scope_(*device_), pool_(pool), pinned_(pinned), registrar_(device_) {
    if (stream) {  // a CUDA stream of this device (DeviceBackend::runs_on)
      stream_ = static_cast<CudaStream*>(stream)->get();
      caller_ = stream;
    } else {
      stream_ = device_->own_stream();
    }
  }
  ~CudaSubmission() override {
    if (finished_ || device_->lost()) return;  // (a lost device runs nothing more)
    mark_blocks_used();  // an error: nothing may be reused or outlive the call before the work is done
    device_->cu().cuStreamSynchronize(stream_);
  }
  CudaSubmission(const CudaSubmission&) = delete;
  CudaSubmission& operator=(const CudaSubmission&) = delete;

  void write(const Layout& device, uint64_t offset, const char* host, std::size_t n) override {
    queued_ = true;
    device_->check(cu().cuMemcpyHtoDAsync(device_first(device) + offset, host, n, stream_), "cuMemcpyHtoDAsync");
  }
  void read(const Layout& device, uint64_t offset, char* host, std::size_t n) override {
    queued_ = true;
    device_->check(cu().cuMemcpyDtoHAsync(host, device_first(device) + offset, n, stream_), "cuMemcpyDtoHAsync");
  }
  std::unique_ptr<Event> write_chunk(const Layout& device, uint64_t offset, const char* host, std::size_t n) override {
    write(device, offset, host, n);
    return record_event(device_, stream_);
  }
  std::unique_ptr<Event> read_chunk(const Layout& device, uint64_t offset, char* host, std::size_t n) override {
    read(device, offset, host, n);
    return record_event(device_, stream_);
  }
  void copy(const Layout& from, const Layout& to, std::size_t n) override {
    queued_ = true;
    device_->check(cu().cuMemcpyDtoDAsync(device_first(to), device_first(from), n, stream_), "cuMemcpyDtoDAsync");
  }
  void walk(const Layout& src, const Layout& dst) override {
    queued_ = true;
    launch_walk(*device_, stream_, src, device_base(src), dst, device_base(dst));
  }
  Layout temporary(const Layout& like, DLDataType dtype) override {
    queued_ = true;
    return temps_.emplace_back(device_, stream_, like, dtype).layout;
  }
  char* pinned(std::size_t bytes) override { return blocks_.emplace_back(pool_.acquire(pinned_, bytes)).data(); }
  char* map(const Layout& device, bool) override {
    fail(ABR_ERR_INTERNAL, "a plan mapped {} memory, which CUDA reaches by DMA only", device_string(device.device));
  }
  void wait() override {
    device_->check(cu().cuStreamSynchronize(stream_), "cuStreamSynchronize");
    queued_ = false;
  }
  void finish() override {
    mark_blocks_used();
    if (!caller_ && queued_) wait();  // after an explicit wait() with nothing queued since, done already
    finished_ = true;
  }
  bool synchronous() const override { return caller_ == nullptr; }
  void settle() noexcept override {
    if (!device_->lost()) cu().cuStreamSynchronize(stream_);
  }
  StagingProvider& staging() override { return pinned_; }
  abr::HostRegistrar* registrar() override { return &registrar_; }

 private:
  const Driver& cu() const { return device_->cu(); }
  void mark_blocks_used() noexcept {
    for (PinnedBlock& block : blocks_) {
      try {
        block.used_until(record_event(device_, stream_));
      } catch (const std::exception&) {  // no event: the synchronize in finish or the destructor covers it
      }
    }
  }

  std::shared_ptr<Device> device_;
  Scope scope_;  // the device's context is current while the work is submitted (on the caller's thread)
  CUstream stream_ = nullptr;
  Stream* caller_ = nullptr;
  bool finished_ = false;
  bool queued_ = false;  // work queued since the last wait()
  PinnedPool& pool_;
  StagingProvider& pinned_;
  HostRegistrar registrar_;
  // Lists: references stay valid as more are added, and an empty one allocates
  // nothing (a deque allocates on construction, on every small transfer).
  std::list<PinnedBlock> blocks_;
  std::list<DeviceTemp> temps_;  // freed on the stream, after the work that uses them
};

}  // namespace

std::unique_ptr<Submission> submit(std::shared_ptr<Device> device, Stream* stream, PinnedPool& pool,
                                   StagingProvider& pinned) {
  return std::make_unique<CudaSubmission>(std::move(device), stream, pool, pinned);
}

}  // namespace abr::cuda
