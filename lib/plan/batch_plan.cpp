#include "lib/plan/batch_plan.hpp"

#include <algorithm>

namespace abr {
namespace {

// A small copy from host memory to a device, or into new host memory: the CPU's, or
// page-locked (cuda_host), where a block of its own each cost a pool's lock and lookup.
bool coalesces(const BatchEntry& entry) {
  return entry.bytes > 0 && entry.bytes <= kCoalesceMax &&
      (entry.plan.path == ABR_PATH_HOST_TO_DEVICE || entry.plan.path == ABR_PATH_HOST_COPY);
}

// A small read from a device reached by DMA only into pageable host memory: alone,
// the driver copies into pageable memory and the host waits for each (one synchronous
// copy per tensor); gathered, every read of the submission is queued into pinned
// memory, the host waits once and copies each out.
bool gathers(const BatchEntry& entry) {
  return entry.plan.path == ABR_PATH_DEVICE_TO_HOST && entry.plan.pageable_bytes && entry.bytes > 0 &&
      entry.bytes <= kCoalesceMax;
}

// The entries whose bytes go as they lie between pageable host memory and a device
// context, too large to coalesce, moved through one pipeline per context and way as
// if one tensor: alone, each under two chunks is one driver copy from pageable memory
// (slower than a pipeline) and each larger one fills and drains a pipeline of its
// own; as one, they move at the pipeline's full speed for their sum, paying its fill
// and drain once. Only where the sum makes two chunks (a pipeline of one overlaps
// nothing) and at least two entries join. `movable`: which entries may move out of
// the caller's order (null: all, as a batch's new results may).
std::vector<StreamedPipeline> streamed(const std::vector<BatchEntry*>& entries, const StagingChoice& choice,
                                       const std::vector<bool>* movable = nullptr) {
  struct Way {
    const void *src_context, *dst_context;  // one of them null: host memory
    std::vector<std::size_t> chosen;
    uint64_t total = 0;
  };
  std::vector<Way> ways;  // in the order of their first entry; a few devices at most
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const BatchEntry& entry = *entries[i];
    if (!entry.plan.pageable_bytes || entry.coalesced || entry.gather || entry.bytes <= kCoalesceMax) continue;
    if (movable && !(*movable)[i]) continue;
    auto way = std::find_if(ways.begin(), ways.end(), [&](const Way& w) {
      return w.src_context == entry.plan.src_context && w.dst_context == entry.plan.dst_context;
    });
    if (way == ways.end()) way = ways.insert(ways.end(), Way{entry.plan.src_context, entry.plan.dst_context, {}, 0});
    way->chosen.push_back(i);
    way->total += entry.bytes;
  }
  std::vector<StreamedPipeline> pipelines;
  for (Way& way : ways) {
    const StagingShape shape = staging_shape(way.total, choice);
    if (way.chosen.size() >= 2 && way.total >= 2 * uint64_t{shape.chunk})
      pipelines.push_back({std::move(way.chosen), shape});
  }
  return pipelines;
}

// Marks the entries of each pipeline.
void mark(const std::vector<BatchEntry*>& entries, const std::vector<StreamedPipeline>& pipelines) {
  for (std::size_t p = 0; p < pipelines.size(); ++p)
    for (std::size_t i : pipelines[p].items) {
      entries[i]->streamed = true;
      entries[i]->pipeline = static_cast<uint32_t>(p);
    }
}

// Whether [begin, end) overlaps any of `merged` (sorted, disjoint, not empty).
bool overlaps(const std::vector<ByteSpan>& merged, const ByteSpan& span) {
  if (span.begin == span.end) return false;
  const auto after = std::upper_bound(merged.begin(), merged.end(), span.begin,
                                      [](uintptr_t at, const ByteSpan& m) { return at < m.end; });
  return after != merged.end() && after->begin < span.end;
}

// The spans sorted and joined where they overlap (touching spans stay apart: they share no byte).
std::vector<ByteSpan> merged(std::vector<ByteSpan> spans) {
  spans.erase(std::remove_if(spans.begin(), spans.end(), [](const ByteSpan& s) { return s.begin == s.end; }),
              spans.end());
  std::sort(spans.begin(), spans.end(), [](const ByteSpan& a, const ByteSpan& b) { return a.begin < b.begin; });
  std::vector<ByteSpan> out;
  for (const ByteSpan& span : spans) {
    if (!out.empty() && span.begin < out.back().end)
      out.back().end = std::max(out.back().end, span.end);
    else
      out.push_back(span);
  }
  return out;
}

// Which pairs no other pair's order matters to: a destination that no other pair
// reads or writes, and a source that no other pair writes. A pair whose own source
// and destination overlap counts as touched (a pair streamed moves between host
// and device memory, which never overlap).
std::vector<bool> untouched(const std::vector<CopySpans>& spans) {
  const std::size_t n = spans.size();
  std::vector<bool> movable(n, true);
  // Destinations overlapping each other: sorted by start, each against the furthest
  // end before it, marking both (every destination that overlaps another is met so).
  std::vector<std::size_t> by_start;
  for (std::size_t i = 0; i < n; ++i)
    if (spans[i].dst.begin != spans[i].dst.end) by_start.push_back(i);
  std::sort(by_start.begin(), by_start.end(),
            [&](std::size_t a, std::size_t b) { return spans[a].dst.begin < spans[b].dst.begin; });
  std::size_t furthest = n;  // none yet
  for (std::size_t i : by_start) {
    if (furthest != n && spans[i].dst.begin < spans[furthest].dst.end) {
      movable[i] = false;
      movable[furthest] = false;
    }
    if (furthest == n || spans[i].dst.end > spans[furthest].dst.end) furthest = i;
  }
  // Destinations against every source, sources against every destination.
  std::vector<ByteSpan> srcs(n), dsts(n);
  for (std::size_t i = 0; i < n; ++i) {
    srcs[i] = spans[i].src;
    dsts[i] = spans[i].dst;
  }
  const std::vector<ByteSpan> read = merged(std::move(srcs)), written = merged(std::move(dsts));
  for (std::size_t i = 0; i < n; ++i)
    if (overlaps(read, spans[i].dst) || overlaps(written, spans[i].src)) movable[i] = false;
  return movable;
}

// Whether the batch's reads into pageable memory may land straight in page-locked
// results, and in which memory: where every one may (its source's backend makes such
// memory, and the caller's stream orders its work: lockable_result_type) and all come
// from one device context.
void place_reads(const std::vector<BatchEntry*>& entries, BatchPlan& batch) {
  const BatchEntry* first = nullptr;
  bool may = true;
  for (const BatchEntry* entry : entries) {
    if (entry->plan.path != ABR_PATH_DEVICE_TO_HOST || !entry->plan.pageable_bytes) continue;
    if (!first) first = entry;
    may = may && entry->locks == first->locks && entry->plan.src_context == first->plan.src_context;
  }
  batch.reads_in_place = may && first && first->locks != 0;
  if (batch.reads_in_place) batch.locked_type = first->locks;
}

}  // namespace

std::vector<StreamedPipeline> plan_copy_batch(const std::vector<BatchEntry*>& entries,
                                              const std::vector<CopySpans>& spans, const StagingChoice& choice) {
  for (BatchEntry* entry : entries) {
    entry->streamed = false;
    entry->pipeline = 0;
  }
  if (spans.size() != entries.size()) return {};  // where the pairs' memory is not known by address
  // The overlap check is paid for every pair: only where a pipeline could run.
  if (streamed(entries, choice).empty()) return {};
  const std::vector<bool> movable = untouched(spans);
  std::vector<StreamedPipeline> pipelines = streamed(entries, choice, &movable);
  mark(entries, pipelines);
  return pipelines;
}

BatchPlan plan_batch(const std::vector<BatchEntry*>& entries, const Endpoint& to, const StagingChoice& choice) {
  BatchPlan batch;
  // As plan_host_device moves one packed tensor: through memory the host engine maps,
  // else by DMA out of page-locked memory (here one pinned block for the whole block).
  if (!to.host) batch.fill = to.can.maps_to_host ? BlockFill::Mapped : BlockFill::Pinned;
  place_reads(entries, batch);
  const bool reads_in_place = batch.reads_in_place;
  uint64_t gathered_bytes = 0;
  const BatchEntry* last_read = nullptr;  // the gathered read the next may join: no other move between
  for (BatchEntry* entry : entries) {
    entry->coalesced = entry->gather = entry->in_results_block = entry->streamed = entry->joins = false;
    entry->offset = 0;
    entry->pipeline = 0;
    if (coalesces(*entry)) {
      const uint64_t slot = batch_slot(entry->bytes);
      if (batch.block_bytes + slot <= kBlockMax) {  // else the block is full: the rest go their own way
        entry->coalesced = true;
        entry->offset = batch.block_bytes;
        batch.block_bytes += slot;
        ++batch.coalesced;
        continue;
      }
    } else if (gathers(*entry)) {
      // Their results get slots of one block too, as small copies from host memory
      // do, not an allocation and a free each. Every result starts
      // 256 bytes aligned, as abr_to_device's would: in place, a read joins the run
      // before it only where it lies a multiple of 256 bytes from that run's reads.
      entry->gather = true;
      gathered_bytes += entry->bytes;
      const uint64_t last_end = last_read ? last_read->source_at + last_read->bytes : 0;
      const bool joins = last_read && entry->allocation && entry->allocation == last_read->allocation &&
          entry->source_at >= last_end && entry->source_at - last_end <= kJoinGap &&
          (!reads_in_place || (entry->source_at - last_read->source_at) % 256 == 0);
      const uint64_t offset =
          joins && reads_in_place ? last_read->offset + (entry->source_at - last_read->source_at) : batch.results_bytes;
      if (offset + entry->bytes <= kBlockMax) {  // else the rest get buffers of their own
        entry->in_results_block = true;
        entry->joins = joins;
        entry->offset = offset;
        batch.results_bytes = batch_slot(offset + entry->bytes);
        last_read = entry;
        continue;
      }
    }
    if (entry->bytes > 0) last_read = nullptr;  // a move of its own between two reads ends their run
  }
  // 1000 sources of 4 KiB are 4 MiB of memcpy: split as one copy of those bytes is.
  if (batch.coalesced) batch.pack_threads = staging_shape(batch.block_bytes, choice).threads;
  // The same for the copy out of 1000 gathered reads of 4 KiB (none where they land in
  // place; counted anyway, for a batch whose page-locked results the pool refuses).
  if (gathered_bytes) batch.copy_out_threads = staging_shape(gathered_bytes, choice).threads;
  batch.streamed = streamed(entries, choice);
  mark(entries, batch.streamed);
  return batch;
}

}  // namespace abr
