#include "lib/plan/staging_shape.hpp"

#include <algorithm>

#include "lib/base/settings.hpp"
#include "lib/host/host_threads.hpp"

namespace abr {

StagingShape staging_shape(uint64_t bytes, const StagingChoice& choice, bool walk) {
  StagingShape shape;
  const std::size_t piece = walk ? kWalkPiece : kParallelPiece;
  // Below two pieces no path runs anything in parallel, and no chunk the environment
  // may set (1 MiB and up) makes two: one thread, one chunk, and the environment
  // left unread (small copies are too cheap to pay for reading it).
  if (bytes < 2 * piece && !choice.chunk_bytes) {
    shape.chunk = static_cast<std::size_t>(bytes);
    return shape;
  }
  const unsigned wanted = choice.threads ? choice.threads : default_threads();
  // A thread for every piece: the plan names the threads that run.
  shape.threads = static_cast<unsigned>(std::clamp<uint64_t>(bytes / piece, 1, wanted));
  // 2 MiB per thread, but at least 8 chunks where the bytes allow (two chunks of a
  // large copy barely overlap), within 8 to 64 MiB.
  std::size_t chunk = std::min<uint64_t>((std::size_t{2} << 20) * shape.threads, bytes / 8);
  chunk = std::clamp<std::size_t>(chunk, std::size_t{8} << 20, std::size_t{64} << 20);
  if (const unsigned long mib = settings::staging_chunk_mib()) chunk = std::size_t{mib} << 20;
  if (choice.chunk_bytes) chunk = static_cast<std::size_t>(choice.chunk_bytes);
  shape.chunk = static_cast<std::size_t>(std::min<uint64_t>(bytes, chunk));
  return shape;
}

}  // namespace abr
