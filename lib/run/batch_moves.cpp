// A batch's moves, as the batch planner placed them: the streamed pipelines, the
// coalesced block (packed on host threads, one copy), and the rest in the caller's
// order, consecutive device moves on one context in one submission, small reads
// gathered into pinned landing blocks (or straight into page-locked results).
// abr_to_device_many (batch.cpp) and abr_copy_many (copy_many.cpp) both run them.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/base/log.hpp"
#include "lib/host/host_copy.hpp"
#include "lib/host/host_threads.hpp"
#include "lib/run/batch_items.hpp"
#include "lib/run/device_moves.hpp"
#include "lib/run/host_sides.hpp"

namespace abr {
namespace {

// Gathered reads (see move_in_order) land in pinned blocks of at least this size.
constexpr std::size_t kLandingBlock = std::size_t{1} << 20;

// The gathered reads of move_in_order not yet queued: device bytes [begin, end) of one
// allocation, landing as they lie there. The gaps between its sources (at most
// kJoinGap, an allocator's rounding) are read too and never copied out.
struct GatheredRun {
  const Layout* first = nullptr;  // its first source (none: no run open)
  std::size_t first_at = 0;       // that source's move
  uintptr_t allocation = 0, begin = 0, end = 0;
  char* landing = nullptr;
  std::size_t room = 0;   // landing space it may fill
  bool in_place = false;  // landing in the results themselves, as plan_batch placed them

  // Queues the run's one read on `open` (a failure names its first source: `at`),
  // taking its slot of the landing space unless it lands in place; closes the run.
  void queue(Submission& open, std::size_t& at, char*& free_landing, std::size_t& landing_left) {
    if (!first) return;
    const std::size_t span = static_cast<std::size_t>(end - begin);
    const std::size_t current = at;
    at = first_at;
    open.read(*first, 0, landing, span);
    at = current;
    if (!in_place) {
      const auto slot = static_cast<std::size_t>(batch_slot(span));
      free_landing += slot;
      landing_left -= slot;
    }
    first = nullptr;
  }
};

// A gathered read landed in pinned memory (see move_in_order), and its result.
struct Landed {
  const char* block;
  char* to;
  std::size_t n;
};

// The landed reads copied out to their results on `threads` host threads, each a run
// of reads of about equal bytes, as the coalesced block is packed (move_coalesced).
void copy_out(const std::vector<Landed>& landed, unsigned threads) {
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, landed.size()));
  if (threads <= 1) {
    for (const Landed& read : landed) std::memcpy(read.to, read.block, read.n);
    return;
  }
  uint64_t total = 0;
  for (const Landed& read : landed) total += read.n;
  // Run p starts at the read where the bytes before it reach p / threads of the total.
  std::vector<std::size_t> starts(threads + 1, landed.size());
  uint64_t before = 0;
  unsigned part = 0;
  for (std::size_t i = 0; i < landed.size() && part < threads; ++i) {
    while (part < threads && before >= total * part / threads) starts[part++] = i;
    before += landed[i].n;
  }
  host_threads().parallel_for(threads, threads, [&](std::size_t p) {
    for (std::size_t i = starts[p]; i < starts[p + 1]; ++i) std::memcpy(landed[i].to, landed[i].block, landed[i].n);
  });
}

}  // namespace

std::string streamed_words(const std::vector<StreamedPipeline>& pipelines, std::size_t one_by_one) {
  std::size_t streamed = 0, ran = 0;
  for (const StreamedPipeline& pipeline : pipelines) {
    streamed += pipeline.items.size();
    ran += pipeline.items.empty() ? 0 : 1;
  }
  std::string words;
  if (ran == 1) words = fmt::format("; {} streamed through one pipeline", streamed);
  if (ran > 1) words = fmt::format("; {} streamed through {} pipelines (one per device and way)", streamed, ran);
  if (one_by_one) words += fmt::format("; {} moved one by one, the pinned pool refusing their pipeline", one_by_one);
  return words;
}

std::size_t Runtime::move_pipelines(const std::vector<std::vector<OrderedMove>>& pipelines,
                                    std::vector<StreamedPipeline>& entries, const char* entry_name, Stream* stream) {
  const auto named = [&](std::size_t p, std::size_t i) {
    return fmt::format(fmt::runtime(entry_name), entries[p].items[i]);
  };
  std::size_t one_by_one = 0;
  for (std::size_t p = 0; p < pipelines.size(); ++p) {
    try {
      move_streamed(pipelines[p], entries[p].shape, stream);
      continue;
    } catch (const Error& e) {
      if (e.status() != ABR_ERR_OUT_OF_MEMORY)  // an asynchronous DMA error cannot be pinned on one piece
        throw Error(e.status(),
                    fmt::format("{} and {} other(s) streamed through one pipeline: {}", named(p, 0),
                                entries[p].items.size() - 1, e.what()),
                    e.backend_code());
      // The pinned pool has no room for the pipeline's blocks: each moves as planned
      // alone (under two chunks, one driver copy without the pool), rewriting what
      // the pipeline wrote. No other entry touches their memory, so none sees it.
      log::debug("a batch's pipeline of {} tensors was refused ({}): each moves on its own", entries[p].items.size(),
                 e.what());
    }
    std::size_t at = 0;
    uint32_t joined = 0;
    try {
      move_in_order(pipelines[p], stream, at, joined);
    } catch (const Error& e) {
      if (at == pipelines[p].size()) throw;  // the last wait: no one entry
      throw Error(e.status(), fmt::format("{}: {}", named(p, at), e.what()), e.backend_code());
    }
    one_by_one += entries[p].items.size();
    entries[p].items.clear();
  }
  return one_by_one;
}

void Runtime::move_streamed(const std::vector<OrderedMove>& moves, const StagingShape& shape, Stream* stream) {
  const Plan& first = *moves.front().plan;
  const bool from_host = first.src_context == nullptr;
  std::vector<char*> host;
  std::vector<Layout> device;
  SegmentMap map;
  for (const OrderedMove& move : moves) {
    host.push_back(const_cast<char*>(first_element(from_host ? *move.src : *move.dst)));
    device.push_back(from_host ? *move.dst : *move.src);
    map.add(move.src->numel * move.dst->itemsize);
  }
  const DLDevice device_id = device.front().device;
  void* context = from_host ? first.dst_context : first.src_context;
  std::unique_ptr<ChunkSide> device_side = device_segments_side(
      std::move(device), map, submit_routed(*backend_of(device_id.device_type), device_id, context, stream));
  auto host_side = std::make_unique<HostSegmentsSide>(std::move(host), map, shape.threads);
  StagingProvider* blocks = device_side->staging();  // the device side's, as for one tensor (plan_host_device)
  ChunkSide& from = from_host ? static_cast<ChunkSide&>(*host_side) : *device_side;
  ChunkSide& to = from_host ? *device_side : static_cast<ChunkSide&>(*host_side);
  run_pipeline(from, to, map.total(), shape, *pool_, *blocks);
  from.finish();
  to.finish();
}

void Runtime::move_coalesced(std::vector<BatchItem>& items, DLDevice dst, const Endpoint& to, void* block,
                             const BatchPlan& placed, Stream* stream) {
  const uint64_t bytes = placed.block_bytes;
  const unsigned threads = placed.pack_threads;
  // Each source whose slot starts in [begin, end) packed (and converted) by the host
  // engine into its slot of `into`.
  const auto pack = [&](char* into, uint64_t begin, uint64_t end, unsigned item_threads) {
    for (BatchItem& item : items) {
      if (!item.coalesced || item.offset < begin || item.offset >= end) continue;
      const Layout& src = item.src;
      if (src.compact && !item.plan.cast) {  // bytes for bytes
        std::memcpy(into + item.offset, first_element(src), static_cast<std::size_t>(item.bytes));
        continue;
      }
      const Layout slot = compact_layout(dst, item.plan.dtype, src.shape, into + item.offset);
      copy_layout_in_parallel(src, first_element(src), item.plan.dtype, into + item.offset, slot.strides.data(),
                              item_threads ? item_threads : item.plan.staging.threads);
    }
  };
  // The slots in `threads` runs of about equal bytes, one a thread, each source on
  // the thread of its run.
  const auto pack_all = [&](char* into) {
    if (threads <= 1) return pack(into, 0, bytes, 0);
    host_threads().parallel_for(threads, threads, [&](std::size_t part) {
      pack(into, bytes * part / threads, bytes * (part + 1) / threads, 1);
    });
  };
  if (placed.fill == BlockFill::Host) return pack_all(static_cast<char*>(block));  // the host engine alone
  const Layout whole = compact_layout(dst, DLDataType{kDLUInt, 8, 1}, Dims{static_cast<int64_t>(bytes)}, block);
  std::unique_ptr<Submission> work = submit_routed(*to.backend, dst, to.context, stream);
  if (placed.fill == BlockFill::Mapped) {
    pack_all(work->map(whole, /*write=*/true));  // straight into the device's memory, mapped
  } else {
    char* staging = work->pinned(static_cast<std::size_t>(bytes));  // one pinned block, then one DMA
    pack_all(staging);
    work->write(whole, 0, staging, static_cast<std::size_t>(bytes));
  }
  work->finish();
}

// The moves of a batch, in order. Consecutive moves on one device context share
// one submission, its waits deferred, finished when the next move is elsewhere
// (another context, the host engine, the pipeline, a peer copy) and at the end;
// before a host-side step the caller's stream is waited for too, so every move
// sees the ones before it. Gathered reads land in pinned blocks of their
// submission and are copied out after its one wait, or, in place, straight in their
// page-locked results with no wait; reads of sources that follow each other in one
// allocation are one copy (a run). `at` names the move running
// (moves.size() for the last wait). Returns the device submissions opened.
uint32_t Runtime::move_in_order(const std::vector<OrderedMove>& moves, Stream* stream, std::size_t& at,
                                uint32_t& joined, unsigned copy_out_threads) {
  std::vector<Landed> landed;  // gathered reads of the open submission
  char* landing = nullptr;     // free space in its current pinned block
  std::size_t landing_left = 0;
  void* open_context = nullptr;
  std::unique_ptr<Submission> open;  // the moves of consecutive pairs on one device context
  bool queued = false;               // device work queued on the caller's stream and not yet waited for
  bool read_queued = false;          // a read into host memory queued on `open`, not yet waited for
  uint32_t submissions = 0;
  GatheredRun run;
  const auto queue_run = [&] { run.queue(*open, at, landing, landing_left); };
  const auto finish_open = [&] {
    read_queued = false;
    if (!open) return;
    queue_run();
    if (!landed.empty()) {
      open->wait();
      copy_out(landed, copy_out_threads);
      landed.clear();
      landing_left = 0;
    }
    open->finish();
    open.reset();
  };
  for (at = 0; at < moves.size(); ++at) {
    const OrderedMove& move = moves[at];
    const Plan& plan = *move.plan;
    const bool on_device =
        (plan.executor == Executor::Source || plan.executor == Executor::Destination) && plan.move != Move::Peer;
    if (!on_device) {
      finish_open();
      if (stream && queued) stream->synchronize();  // the host's step reads what the stream wrote
      queued = false;
      execute(plan, *move.src, *move.dst, stream);
      continue;
    }
    const bool at_source = plan.executor == Executor::Source;
    const DLDevice device = at_source ? move.src->device : move.dst->device;
    void* context = at_source ? plan.src_context : plan.dst_context;
    if (!open || open_context != context) {
      finish_open();
      open = submit_routed(*backend_of(device.device_type), device, context, stream);
      open->defer_waits();
      open_context = context;
      ++submissions;
    }
    if (move.gather) {
      const std::size_t n = static_cast<std::size_t>(move.src->numel * move.dst->itemsize);
      const auto begin = reinterpret_cast<uintptr_t>(first_element(*move.src));  // compact: its first byte
      // One copy with the run before it, as plan_batch joined them, where the run is
      // open and (landing) its pinned block has room; else a copy of its own.
      const bool extends = move.joins && run.first && run.in_place == move.in_place &&
          (move.in_place || begin + n - run.begin <= run.room);
      if (!extends) {
        queue_run();
        if (move.in_place) {
          run = {move.src, at, move.allocation, begin, begin, const_cast<char*>(first_element(*move.dst)), 0, true};
        } else {
          const auto slot = static_cast<std::size_t>(batch_slot(n));
          if (slot > landing_left) {
            landing_left = std::max(slot, kLandingBlock);
            landing = open->pinned(landing_left);
          }
          run = {move.src, at, move.allocation, begin, begin, landing, move.allocation ? landing_left : slot, false};
        }
      }
      if (!move.in_place)
        landed.push_back({run.landing + (begin - run.begin), const_cast<char*>(first_element(*move.dst)), n});
      run.end = begin + n;
      joined += extends ? 1 : 0;
    } else {
      queue_run();  // before anything else the submission does: a later move may write what the run reads
      // The host engine packs a source on the host now: an earlier move of this
      // submission may still be writing that memory (a DMA-only device's queued read).
      if (read_queued && plan.pack == Step::Host) {
        open->wait();
        read_queued = false;
      }
      submit_device_move(plan, *move.src, *move.dst, *open);
      read_queued = read_queued || plan.path == ABR_PATH_DEVICE_TO_HOST;
    }
    queued = stream != nullptr;
  }
  finish_open();
  return submissions;
}

}  // namespace abr
