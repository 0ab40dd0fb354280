// How a transfer of some bytes is cut: how many host threads run it, and, when it is
// staged, its chunk size. A decision, so the planner's (the Plan carries it); the
// batch planner asks it for each pipeline and block it plans.
#pragma once

#include <cstddef>
#include <cstdint>

namespace abr {

// Host threads: never more than pieces of kWalkPiece when the host engine walks a view
// (`walk`), else of kParallelPiece (lib/host/host_threads.hpp); one, never touching the
// pool, below two pieces. The chunk grows with the threads (2 MiB per thread, at least
// 8 chunks where the bytes allow, 8 to 64 MiB). A runtime's choice
// (abr_runtime_set_staging) wins; else the environment's: ARRAYBRIDGE_STAGING_CHUNK_MIB
// and ARRAYBRIDGE_STAGING_THREADS.
struct StagingShape {
  std::size_t chunk = 0;
  unsigned threads = 1;
};
struct StagingChoice {  // 0: not chosen
  uint32_t threads = 0;
  uint64_t chunk_bytes = 0;
};
StagingShape staging_shape(uint64_t bytes, const StagingChoice& choice = {}, bool walk = false);

}  // namespace abr
