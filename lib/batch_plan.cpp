#include "lib/batch_plan.hpp"

namespace abr {
namespace {

// A small copy from host memory to a device, or into new CPU memory.
bool coalesces(const BatchEntry& entry, bool into_plain_host) {
  return entry.bytes > 0 && entry.bytes <= kCoalesceMax &&
      (entry.plan.path == ABR_PATH_HOST_TO_DEVICE || (entry.plan.path == ABR_PATH_HOST_COPY && into_plain_host));
}

// A small read from a device reached by DMA only into pageable host memory: alone,
// the driver copies into pageable memory and the host waits for each (one synchronous
// copy per tensor); gathered, every read of the submission is queued into pinned
// memory, the host waits once and copies each out.
bool gathers(const BatchEntry& entry) {
  return entry.plan.path == ABR_PATH_DEVICE_TO_HOST && entry.plan.pageable_bytes && entry.bytes > 0 &&
      entry.bytes <= kCoalesceMax;
}

// The entries whose bytes go as they lie between pageable host memory and one device
// context, too large to coalesce, moved through one pipeline as if one tensor: alone,
// each under two chunks is one driver copy from pageable memory (13 GB/s on an H100
// from 1 to 16 MiB) and each larger one fills and drains a pipeline of its own; as
// one, they move at the pipeline's speed for their sum (50 GB/s at 1 GiB). Only where
// the sum makes two chunks (a pipeline of one overlaps nothing) and at least two
// entries join. Their results are new, so the order they move in is theirs to choose.
std::vector<std::size_t> streamed(const std::vector<BatchEntry*>& entries, const StagingChoice& choice) {
  std::vector<std::size_t> chosen;
  const void* context = nullptr;
  uint64_t total = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const BatchEntry& entry = *entries[i];
    if (!entry.plan.pageable_bytes || entry.coalesced || entry.gather || entry.bytes <= kCoalesceMax) continue;
    // One destination: every such copy goes the same way, up to a device or down from one.
    const void* device_context = entry.plan.src_context ? entry.plan.src_context : entry.plan.dst_context;
    if (chosen.empty())
      context = device_context;
    else if (device_context != context)
      continue;  // another device (a batch to the CPU from several) moves its own way
    chosen.push_back(i);
    total += entry.bytes;
  }
  if (chosen.size() < 2 || total < 2 * uint64_t{staging_shape(total, choice).chunk}) return {};
  return chosen;
}

}  // namespace

BatchPlan plan_batch(const std::vector<BatchEntry*>& entries, bool into_plain_host, const StagingChoice& choice) {
  BatchPlan batch;
  for (BatchEntry* entry : entries) {
    entry->coalesced = entry->gather = entry->in_results_block = entry->streamed = false;
    entry->offset = 0;
    if (coalesces(*entry, into_plain_host)) {
      const uint64_t slot = batch_slot(entry->bytes);
      if (batch.block_bytes + slot > kBlockMax) continue;  // the block is full: the rest go their own way
      entry->coalesced = true;
      entry->offset = batch.block_bytes;
      batch.block_bytes += slot;
      ++batch.coalesced;
    } else if (gathers(*entry)) {
      // Their results get slots of one block too, as small copies from host memory
      // do: 1000 results of 4 KiB were 1000 allocations and frees.
      entry->gather = true;
      const uint64_t slot = batch_slot(entry->bytes);
      if (batch.results_bytes + slot > kBlockMax) continue;  // the rest get buffers of their own
      entry->in_results_block = true;
      entry->offset = batch.results_bytes;
      batch.results_bytes += slot;
    }
  }
  batch.streamed = streamed(entries, choice);
  for (std::size_t i : batch.streamed) entries[i]->streamed = true;
  return batch;
}

}  // namespace abr
