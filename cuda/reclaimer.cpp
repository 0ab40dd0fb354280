#include "cuda/reclaimer.hpp"

#include <new>

#include "lib/base/log.hpp"

namespace abr::cuda {

Reclaimer::~Reclaimer() {
  if (forked()) {  // no thread to join here, and what is pending is the parent's driver's to free
    for (auto& storage : pending_) (void)storage.release();
    new (&thread_) std::thread();  // forgets the parent's thread (joining it, or destroying it joinable, is fatal)
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();  // it empties pending_ before it ends
}

void Reclaimer::release_after_device_work(std::unique_ptr<Storage> storage, uint64_t pooled_bytes) noexcept {
  if (!storage) return;
  if (forked()) {  // the parent's device memory, an inherited tensor's: this child's driver cannot free it
    (void)storage.release();
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  try {
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    pending_.push_back(std::move(storage));
    ++handed_over_;
    pooled_pending_ += pooled_bytes;
    lock.unlock();
    wake_.notify_all();
    return;
  } catch (const std::exception& e) {  // no thread or no memory: wait here instead
    log::debug("the CUDA reclaimer cannot defer a release ({}): waiting for the devices", e.what());
  }
  lock.unlock();
  barrier();
  storage.reset();
}

bool Reclaimer::returning() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return pooled_pending_ + pooled_releasing_ > 0;
}

void Reclaimer::drain() noexcept {
  if (forked()) return;  // nothing is released here (release_after_device_work), and no thread would wake this
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = handed_over_;
  released_.wait(lock, [&] { return released_count_ >= target; });
}

void Reclaimer::run() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, nothing left
    std::vector<std::unique_ptr<Storage>> batch;
    batch.swap(pending_);
    pooled_releasing_ = pooled_pending_;
    pooled_pending_ = 0;
    lock.unlock();
    barrier();  // after every hand-over in the batch: the work queued before each has completed
    batch.clear();
    lock.lock();
    pooled_releasing_ = 0;
    released_count_ = handed_over_ - pending_.size();  // all but what arrived during the barrier
    released_.notify_all();
  }
}

void Reclaimer::barrier() noexcept {
  for (const std::shared_ptr<Device>& device : devices_) {
    if (device->lost() || !device->has_context()) continue;  // no context: nothing was ever queued there
    try {
      Scope scope(*device);
      device->check(device->cu().cuCtxSynchronize(), "cuCtxSynchronize");
    } catch (const std::exception& e) {  // a lost device runs nothing more: its memory is free to go
      log::warn("waiting for the work queued on a CUDA device failed: {}", e.what());
    }
  }
}

}  // namespace abr::cuda
