#include "lib/run/pipeline.hpp"

#include <algorithm>
#include <array>

#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/base/fault.hpp"

namespace abr {

void run_pipeline(ChunkSide& from, ChunkSide& to, uint64_t bytes, const StagingShape& shape, PinnedPool& pool,
                  StagingProvider& staging) {
  if (bytes == 0) return;
  const uint64_t chunk = std::max<uint64_t>(shape.chunk, 1);
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  const auto size_of = [&](uint64_t k) { return static_cast<std::size_t>(std::min(chunk, bytes - k * chunk)); };
  std::array<PinnedBlock, kBlocksInFlight> blocks;
  std::array<std::unique_ptr<Event>, kBlocksInFlight> filled, emptied;  // after the blocks: destroyed first
  // An asynchronous source reads ahead while earlier chunks are written; a
  // synchronous one (host threads) would only delay the write of the chunk before.
  const uint64_t read_ahead = from.asynchronous() ? kBlocksInFlight - 1 : 0;
  try {
    uint64_t next = 0;  // the next chunk to read
    const auto fill = [&](uint64_t k) {
      std::size_t b = k % kBlocksInFlight;
      if (emptied[b]) {  // the block's previous chunk has left it
        emptied[b]->wait();
        emptied[b].reset();
      }
      if (!blocks[b]) blocks[b] = pool.acquire(staging, static_cast<std::size_t>(std::min(chunk, bytes)));
      fault::point(ABR_ERR_BACKEND, "pipeline read");
      if (chunks == 1)
        from.read_now(k * chunk, blocks[b].data(), size_of(k));
      else
        filled[b] = from.read(k * chunk, blocks[b].data(), size_of(k));
    };
    for (uint64_t k = 0; k < chunks; ++k) {
      while (next < chunks && next <= k + read_ahead) fill(next++);
      const std::size_t b = k % kBlocksInFlight;
      if (filled[b]) {
        filled[b]->wait();
        filled[b].reset();
      }
      fault::point(ABR_ERR_BACKEND, "pipeline write");
      if (chunks == 1 && to.write_now(0, blocks[b].data(), size_of(0))) break;  // done: no event guards the block
      emptied[b] = to.write(k * chunk, blocks[b].data(), size_of(k));
    }
  } catch (...) {
    from.settle();  // nothing may still use a block when it goes back
    to.settle();
    throw;
  }
  for (std::size_t b = 0; b < kBlocksInFlight; ++b)
    if (blocks[b] && emptied[b]) blocks[b].used_until(std::move(emptied[b]));
}

}  // namespace abr
