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

#include "lib/memory/staging.hpp"
#include "lib/platform/fork_guard.hpp"
#include "lib/tensor/storage.hpp"
#include "cuda/device.hpp"

namespace abr::cuda {

// Also the pinned pool's ReturningBlocks: deleted cuda_host tensors' blocks come
// back through it, and the pool at its limit waits for them (only when some are
// on their way: a drain synchronizes every device).
class Reclaimer final : public ReturningBlocks {
 public:
  explicit Reclaimer(std::vector<std::shared_ptr<Device>> devices) : devices_(std::move(devices)) {}
  ~Reclaimer() override;  // releases what is still pending, after a last barrier
  Reclaimer(const Reclaimer&) = delete;
  Reclaimer& operator=(const Reclaimer&) = delete;

  // Destroys `storage` once the work queued on every device before this call has
  // completed; `pooled_bytes`: the pinned pool's bytes it gives back then.
  void release_after_device_work(std::unique_ptr<Storage> storage, uint64_t pooled_bytes = 0) noexcept;
  // Waits until everything handed over so far is released (memory wanted back now).
  void drain() noexcept;

  bool returning() noexcept override;
  void wait_for_returning() noexcept override { drain(); }

 private:
  void run() noexcept;
  void barrier() noexcept;
  // A forked child's copy: its thread stayed in the parent, and the memory is the parent's driver's.
  bool forked() const noexcept { return born_.inherited(); }

  const ForkStamp born_;
  std::vector<std::shared_ptr<Device>> devices_;
  std::mutex mutex_;
  std::condition_variable wake_, released_;
  std::vector<std::unique_ptr<Storage>> pending_;
  uint64_t handed_over_ = 0, released_count_ = 0;
  uint64_t pooled_pending_ = 0, pooled_releasing_ = 0;  // the pool's bytes in pending_, and in the batch releasing
  bool stop_ = false;
  std::thread thread_;  // started on the first hand-over
};

// Storage whose release waits for the devices' queued work: the owner of memory
// given to a consumer.
class ReleasedAfterDeviceWork final : public Storage {
 public:
  // `pooled_bytes`: the pinned pool's bytes `inner` holds (a cuda_host block).
  ReleasedAfterDeviceWork(std::unique_ptr<Storage> inner, std::shared_ptr<Reclaimer> reclaimer,
                          uint64_t pooled_bytes = 0)
      : inner_(std::move(inner)), reclaimer_(std::move(reclaimer)), pooled_bytes_(pooled_bytes) {}
  ~ReleasedAfterDeviceWork() override { reclaimer_->release_after_device_work(std::move(inner_), pooled_bytes_); }

 private:
  std::unique_ptr<Storage> inner_;
  std::shared_ptr<Reclaimer> reclaimer_;
  uint64_t pooled_bytes_;
};

}  // namespace abr::cuda
