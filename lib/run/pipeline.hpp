// The transfer pipeline: every chunked transfer runs here, whatever its two
// sides (pageable host memory <-> CUDA, OpenCL <-> OpenCL across contexts,
// CUDA <-> OpenCL). Bytes move through pinned blocks from the pool, several
// chunks in flight. A side is host memory, copied by the host threads, or a
// backend's device memory, moved by DMA on a queue and tracked by an Event:
// backends provide sides, never a loop of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "lib/host/host_threads.hpp"
#include "lib/plan/staging_shape.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/memory/pinned_pool.hpp"
#include "lib/devices/stream.hpp"

namespace abr {

class HostRegistrar;

// One side of a staged transfer: the compact bytes chunks are read from (the
// source) or written to (the destination).
class ChunkSide {
 public:
  virtual ~ChunkSide() = default;
  // Whether read and write return before the bytes have moved (a DMA on a queue).
  virtual bool asynchronous() const = 0;
  // Bytes [offset, offset + n) of this side into `block`; an event after the move
  // when it may still be running, nullptr when it is done.
  virtual std::unique_ptr<Event> read(uint64_t offset, char* block, std::size_t n) = 0;
  // The same, done on return: a move of one chunk has nothing to read ahead of, and
  // a device side waits best in its driver's own blocking call.
  virtual void read_now(uint64_t offset, char* block, std::size_t n) {
    if (std::unique_ptr<Event> moved = read(offset, block, n)) moved->wait();
  }
  // n bytes of `block` into [offset, offset + n) of this side; the same event rule.
  virtual std::unique_ptr<Event> write(uint64_t offset, const char* block, std::size_t n) = 0;
  // The same, done on return, where the side would be waited for at finish() anyway:
  // a move of one chunk then gives its block back with no event to record and
  // query. False (nothing written) where the side must return at once or has more
  // to run after the write.
  virtual bool write_now(uint64_t /*offset*/, const char* /*block*/, std::size_t /*n*/) { return false; }
  // After the last chunk: the side's own closing steps (a scatter kernel, freeing a
  // temporary in order) and completion as its stream asks.
  virtual void finish() {}
  // After an error: waits, never throwing, until nothing this side submitted still runs.
  virtual void settle() noexcept {}
  // The pinned memory this side's DMA is fastest from, or nullptr (host memory).
  virtual StagingProvider* staging() { return nullptr; }
  // This side's driver, when it can page-lock the other side's blocks (CUDA); else nullptr.
  virtual HostRegistrar* registrar() { return nullptr; }
};

// Moves `bytes` from one side to the other in chunks of shape.chunk through
// kBlocksInFlight pool blocks of `staging`. When the destination is asynchronous
// its last writes may still run on return: each block goes back to the pool
// guarded by the event of its last write. On an error both sides are settled
// before any block goes back. Neither side is finished here.
void run_pipeline(ChunkSide& from, ChunkSide& to, uint64_t bytes, const StagingShape& shape, PinnedPool& pool,
                  StagingProvider& staging);

// Blocks per pipeline: with three, a block is refilled while the two chunks
// before it are still in flight (a read and a write overlap even when both sides are DMA).
constexpr std::size_t kBlocksInFlight = 3;

}  // namespace abr
