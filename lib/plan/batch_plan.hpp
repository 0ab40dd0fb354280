// The batch planner: what abr_to_device_many and abr_copy_many do with each tensor
// beyond its own plan (lib/plan/planner.hpp). Small copies from host memory share one
// block and one copy, small reads into new host memory are gathered into pinned
// memory and land in slots of one block, and larger copies between pageable memory
// and a device stream through one pipeline per device and way (for copy_many, only
// pairs whose memory no other pair touches). Decided here, from the items' plans,
// sizes and memory; lib/run/batch.cpp carries it out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/host/host_threads.hpp"
#include "lib/plan/staging_shape.hpp"
#include "lib/plan/planner.hpp"

namespace abr {

// A copy from host memory this small, to a device or into new CPU memory, moves
// with the others into a block of at most kBlockMax: a buffer and a write of their
// own cost the same whatever the size, so many small ones in one block beat one
// call each by far. The gain shrinks as tensors grow, and larger ones in one big
// block lose (the fresh block's mapping costs more than the calls it saves).
// Into host memory a buffer of its own costs only a malloc, but hundreds of them
// at once miss glibc's per-thread cache, so one block and the loop come out close.
inline constexpr uint64_t kCoalesceMax = uint64_t{64} << 10;
inline constexpr uint64_t kBlockMax = uint64_t{16} << 20;
// Gathered reads of sources this close after each other in one allocation are one
// copy, the gap read too: torch's caching allocator rounds small blocks to 512 bytes.
inline constexpr uint64_t kJoinGap = 512;

// One tensor of a batch as the batch planner sees it: its plan and size in, its place out.
struct BatchEntry {
  Plan plan;
  uint64_t bytes = 0;             // bytes written to its result; 0 for a view
  uint64_t offset = 0;            // its slot in the coalesced block, or in the results block
  bool coalesced = false;         // packed with the other small copies from host memory into one block, one copy
  bool gather = false;            // a small read into new host memory, queued with the others into pinned memory
  bool in_results_block = false;  // that read's result is a slot of the batch's one block of such results
  bool joins = false;             // read in one copy with the gathered read before it (see plan_batch)
  bool streamed = false;          // moved with other pageable copies of its way through one pipeline
  uint32_t pipeline = 0;          // which of the batch's pipelines (BatchPlan::streamed)
  uintptr_t allocation = 0;       // in: the source's device allocation, where its backend knows it (0: unknown)
  uintptr_t source_at = 0;        // in: a compact source's first byte (gathered reads join by it)
  // in: the page-locked memory its new host result may be made in (lockable_result_type), 0: none
  DLDeviceType locks = static_cast<DLDeviceType>(0);
};

// One pipeline of a batch: its entries, in order (two at least), and how their sum is
// cut (the threads that pack and the chunk), as if one tensor of those bytes.
struct StreamedPipeline {
  std::vector<std::size_t> items;
  StagingShape shape;
};

// How the batch's coalesced block gets its bytes on its destination.
enum class BlockFill : uint8_t {
  Host,    // new host memory (cpu, cuda_host): the host engine packs straight into it
  Mapped,  // memory the host engine maps (OpenCL): packed through the mapping
  Pinned,  // memory reached by DMA only (CUDA): packed into one pinned block, then one DMA
};

struct BatchPlan {
  std::size_t coalesced = 0;         // entries in the coalesced block
  uint64_t block_bytes = 0;          // that block's size
  BlockFill fill = BlockFill::Host;  // how that block is filled
  unsigned pack_threads = 1;         // host threads that pack it: as many as a memcpy of its bytes is cut for
  uint64_t results_bytes = 0;        // the gathered results' block's size (0: none)
  // Reads into pageable memory land straight in that block, page-locked memory of
  // `locked_type`: no pinned landing, copy out or host wait (see plan_batch).
  bool reads_in_place = false;
  DLDeviceType locked_type = static_cast<DLDeviceType>(0);
  // Host threads that copy the gathered reads out of their pinned landing (where
  // they are not read in place): as many as a memcpy of all their bytes is cut for.
  unsigned copy_out_threads = 1;
  // The streamed entries, one pipeline per device context and way (up or down).
  std::vector<StreamedPipeline> streamed;
};

// Whether a source of `bytes` in host memory (counted at the larger of its itemsize and
// the target's) goes into the batch's coalesced block on `to` whatever that memory is:
// then nothing need ask the driver whether it is page-locked.
inline bool packed_anyway(uint64_t bytes, const Endpoint& to) {
  return to.backend && !to.kind->host_memory && bytes <= kCoalesceMax;
}

// Places every entry of a batch of new results on one destination, marking each and
// returning the blocks' sizes. A gathered read that follows the one before it in the
// same allocation, at most kJoinGap after its end, is read in one copy with it
// (marked `joins`). The gathered results' block is read into directly (the plan's
// `reads_in_place`), with no pinned landing, copy out or wait, where every read into
// pageable memory may have a page-locked result (`locks`) of one kind, from one
// device context. Then a read joins only a multiple of 256 bytes from the run's
// start, and is placed where it lies from that read; every run starts at a 256-byte
// boundary, so every result is 256 bytes aligned, as abr_to_device's is.
// `to`: the destination, whose memory decides how the coalesced block is filled.
BatchPlan plan_batch(const std::vector<BatchEntry*>& entries, const Endpoint& to, const StagingChoice& choice);

// The bytes of one side of a pair, by address: [begin, end).
struct ByteSpan {
  uintptr_t begin = 0, end = 0;
};
struct CopySpans {
  ByteSpan src, dst;
};

// abr_copy_many's pairs that stream, one list per pipeline (plan_batch's rule:
// pageable bytes one way between host memory and one device context, from two chunks
// and two pairs), marking them. They move before the others, so only pairs whose
// memory the order cannot matter to: no other pair reads or writes their destination,
// nor writes their source (`spans`, one per entry; empty where the pairs' memory is
// not all known by address, and then none streams).
std::vector<StreamedPipeline> plan_copy_batch(const std::vector<BatchEntry*>& entries,
                                              const std::vector<CopySpans>& spans, const StagingChoice& choice);

// A result's room in one of a batch's blocks: the next result starts 256 bytes aligned, as DLPack recommends.
constexpr uint64_t batch_slot(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace abr
