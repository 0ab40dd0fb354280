// The pinned host pool: a caching allocator over the backends' staging memory
// (page-locked or device-mapped host memory, which is slow to get and fast to
// use). Pinning is the provider's job; the pool only decides sizes, reuse,
// limits and statistics, so all of it is tested without a GPU.
//
// Reuse is safe with asynchronous copies: whoever hands a block to a stream
// records that use (PinnedBlock::used_by), and a returned block is given out
// again only once every recorded event has completed (CuPy's watch list, with
// PyTorch's per-stream events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "lib/memory/staging.hpp"
#include "lib/devices/memory_stats.hpp"
#include "lib/devices/stream.hpp"

namespace abr {

class PinnedPool;

// A block on loan from the pool; returns itself when destroyed.
class PinnedBlock {
 public:
  PinnedBlock() = default;
  PinnedBlock(PinnedBlock&&) noexcept = default;
  PinnedBlock& operator=(PinnedBlock&& other) noexcept;
  ~PinnedBlock();

  char* data() const { return block_->data(); }
  std::size_t size() const { return block_->size(); }
  explicit operator bool() const { return block_ != nullptr; }

  // Work submitted to `stream` so far uses this block: the pool will not give
  // it out again before that work completes. Call after submitting the work.
  void used_by(Stream& stream);
  // The same with the event itself (recorded after the work, on whatever stream ran it).
  void used_until(std::unique_ptr<Event> event);

 private:
  friend class PinnedPool;
  PinnedBlock(std::shared_ptr<PinnedPool> pool, std::unique_ptr<StagingBlock> block, const void* domain)
      : pool_(std::move(pool)), block_(std::move(block)), domain_(domain) {}
  void give_back() noexcept;

  std::shared_ptr<PinnedPool> pool_;
  std::unique_ptr<StagingBlock> block_;
  const void* domain_ = nullptr;
  std::vector<std::shared_ptr<Event>> users_;  // shared with the cache, which waits for them unlocked
};

class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  // 0 = the default limit, a quarter of physical memory.
  static std::shared_ptr<PinnedPool> create(uint64_t limit_bytes = 0);
  ~PinnedPool();  // waits for cached blocks still in use by a stream, then frees all

  // A block of at least `bytes` in `provider`'s domain: a cached one whose users
  // have finished, or a new one. At the limit it waits for what is on its way back:
  // cached blocks that streams still use (again, up to 64 times, when another thread
  // takes them first), else once for ReturningBlocks. Throws
  // ABR_ERR_OUT_OF_MEMORY when the limit or the provider refuses, having first freed
  // what the cache could give up.
  PinnedBlock acquire(StagingProvider& provider, std::size_t bytes);

  // `returning` may hold blocks on their way back: at the limit, or when a provider
  // has no memory, the pool waits for them once before it refuses. Kept while it lives.
  void add_returning(std::weak_ptr<ReturningBlocks> returning);

  // Frees every cached block whose users have finished; returns the bytes freed.
  uint64_t trim();
  // Frees every cached block of `domain`, waiting for its users first: a backend
  // going away gives back its memory while its context still lives. Blocks on
  // loan are freed when they come back.
  void release_domain(const void* domain);
  // A lower limit trims at once; blocks in use stay until returned. 0 = the default.
  void set_limit(uint64_t limit_bytes);
  PoolStats stats();  // checks the events of cached blocks for bytes_waiting

  // The size a request is rounded to: whole pages, and at most 1/8 above the
  // request beyond that (8 classes per power of two, not PyTorch's 2x).
  static std::size_t size_class(std::size_t bytes);

 private:
  struct Cached {
    std::unique_ptr<StagingBlock> block;
    std::vector<std::shared_ptr<Event>> users;  // shared: waited for without the lock, the block left in place
  };
  using Key = std::pair<const void*, std::size_t>;  // (provider domain, size class)

  explicit PinnedPool(uint64_t limit_bytes);
  friend class PinnedBlock;
  void give_back(std::unique_ptr<StagingBlock> block, const void* domain,
                 std::vector<std::shared_ptr<Event>> users) noexcept;
  static bool idle(Cached& cached) noexcept;  // drops completed events; true when none are left
  // Moves idle cached blocks into `freed` until `wanted` bytes are released
  // (everything idle for UINT64_MAX), but none of class `keep` (one is wanted: taken,
  // not freed). Caller holds mutex_; frees outside it.
  uint64_t release_idle(uint64_t wanted, std::vector<std::unique_ptr<StagingBlock>>& freed, const Key* keep = nullptr);
  // Removes a cached block from the cache and the statistics (caller holds the lock);
  // returns it and advances `it`.
  Cached take_cached(std::multimap<Key, Cached>::iterator& it);
  // A cached block of `key` whose users have finished, counted as a hit; else null,
  // counted as a miss unless `missed` already was.
  std::unique_ptr<StagingBlock> take_idle(const Key& key, bool missed);
  std::unique_ptr<StagingBlock> allocate_within_limit(StagingProvider& provider, const Key& key);
  // At the limit: waits, without the lock, for the users of a cached block of `key`,
  // or else of enough cached blocks of any kind to make room for `key`'s size. True
  // without a wait when room was made or a block of `key` finished meanwhile (another
  // thread waited for it), so the caller looks again; false when the cached blocks,
  // busy or idle, cannot make room.
  bool wait_for_busy_cached(const Key& key);
  // Waits, without the lock, for every ReturningBlocks with blocks on their way back;
  // false when none had any (nothing to wait for: no device is synchronized for nothing).
  bool wait_for_returning();

  std::mutex mutex_;
  std::vector<std::weak_ptr<ReturningBlocks>> returning_;
  std::multimap<Key, Cached> cached_;
  PoolStats stats_;
};

}  // namespace abr
