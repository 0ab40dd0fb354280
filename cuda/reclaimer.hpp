// Memory the runtime hands out (exported tensors' device memory, cuda_host
// blocks) may still be read by work a consumer queued on a stream we never saw
// when its deleter runs: DLPack lets a consumer delete a tensor as soon as it is
// done *submitting* work. The reclaimer releases such memory only after every
// device has finished the work queued before the hand-over (cuCtxSynchronize on
// each device with a context), on a thread of its own, so no deleter blocks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lib/storage.hpp"
#include "cuda/device.hpp"

namespace abr::cuda {

class Reclaimer {
 public:
  explicit Reclaimer(std::vector<std::shared_ptr<Device>> devices) : devices_(std::move(devices)) {}
  ~Reclaimer();  // releases what is still pending, after a last barrier
  Reclaimer(const Reclaimer&) = delete;
  Reclaimer& operator=(const Reclaimer&) = delete;

  // Destroys `storage` once the work queued on every device before this call has completed.
  void release_after_device_work(std::unique_ptr<Storage> storage) noexcept;
  // Waits until everything handed over so far is released (memory wanted back now).
  void drain() noexcept;

 private:
  void run() noexcept;
  void barrier() noexcept;

  std::vector<std::shared_ptr<Device>> devices_;
  std::mutex mutex_;
  std::condition_variable wake_, released_;
  std::vector<std::unique_ptr<Storage>> pending_;
  uint64_t handed_over_ = 0, released_count_ = 0;
  bool stop_ = false;
  std::thread thread_;  // started on the first hand-over
};

// Storage whose release waits for the devices' queued work: the owner of memory
// given to a consumer.
class ReleasedAfterDeviceWork final : public Storage {
 public:
  ReleasedAfterDeviceWork(std::unique_ptr<Storage> inner, std::shared_ptr<Reclaimer> reclaimer)
      : inner_(std::move(inner)), reclaimer_(std::move(reclaimer)) {}
  ~ReleasedAfterDeviceWork() override { reclaimer_->release_after_device_work(std::move(inner_)); }

 private:
  std::unique_ptr<Storage> inner_;
  std::shared_ptr<Reclaimer> reclaimer_;
};

}  // namespace abr::cuda
