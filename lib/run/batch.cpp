// Many tensors in one call: abr_to_device_many and abr_copy_many.
//
// abr_to_device_many runs in phases on one Batch, so that a failure anywhere leaves
// every source the caller's and hands nothing out:
//  1. plan_items: each source validated and planned against one destination endpoint;
//  2. place_items, prepare_results, move_items: the batch placed (plan_batch:
//     coalesced, gathered or streamed), every result's memory and header allocated,
//     then the work (after a failure the stream is waited for before the sources go
//     back); describe_batch puts it into the report's words;
//  3. commit_batch (cannot fail): headers finished, sources handed to their results,
//     released, or kept by the stream until its work is done.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "lib/plan/batch_plan.hpp"
#include "lib/run/device_moves.hpp"
#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/memory/host_buffer.hpp"
#include "lib/host/host_copy.hpp"
#include "lib/run/host_sides.hpp"
#include "lib/host/host_threads.hpp"
#include "lib/base/log.hpp"
#include "lib/run/runtime.hpp"
#include "lib/base/text.hpp"

namespace abr {
namespace {

// Gathered reads (see move_in_order) land in pinned blocks of at least this size.
constexpr std::size_t kLandingBlock = std::size_t{1} << 20;
constexpr std::size_t kMaxBatch = std::size_t{1} << 24;

// What the caller's stream holds until the batch's work is done, in one piece:
// the sources that work reads and its share of the results' memory.
class HeldByStream final : public Storage {
 public:
  std::vector<SourceTensor> sources;
  std::vector<std::shared_ptr<Storage>> memory;
};

// The source a host wrap keeps alive, given to it only at commit: until then a
// failure frees the wrap without running the source's deleter.
class DeferredSource final : public Storage {
 public:
  std::optional<SourceTensor> source;
};

}  // namespace

// A batch's tensor: its plan and place (BatchEntry), its source and its result.
struct Runtime::BatchItem : BatchEntry {
  // Provided, so that vector(count) does not zero each item before constructing it
  // (the whole large item, for every tensor); every member has an initializer of its own.
  BatchItem() {}  // NOLINT(modernize-use-equals-default): "= default" would zero it
  Layout src;
  // In place, not each on the heap: a batch of many small tensors made several allocations
  // each, more than glibc's per-thread cache (7 per size) holds, and they weighed on it.
  std::optional<SourceTensor> source;    // given back, its deleter not called, unless the batch commits
  std::optional<PendingExport> pending;  // the result's header, allocated before any work
  std::unique_ptr<Storage> memory;       // a copy's own memory, or a wrap's
  std::shared_ptr<Storage> shared;       // the same when a stream holds it too, or the coalesced block
  DeferredSource* wrap_owner = nullptr;
};

namespace {

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

// The bytes a tensor in memory known by its address spans (none for no element;
// min_byte <= 0 wraps back).
ByteSpan bytes_of(const Layout& tensor) {
  if (tensor.numel == 0) return {};
  const auto first = reinterpret_cast<uintptr_t>(first_element(tensor));
  return {first + static_cast<uintptr_t>(tensor.min_byte), first + static_cast<uintptr_t>(tensor.max_byte_end)};
}

// The device allocations a batch has checked: a later source inside one of them
// is on that device and context, and needs no driver call of its own (torch's small
// tensors are carved from a few segments; a batch's results share one block).
class CheckedAllocations {
 public:
  // The endpoint of a source inside an allocation seen before, or nullptr.
  const Endpoint* covering(const Layout& tensor) const {
    if (tensor.numel == 0 || !is_direct_address(tensor.device.device_type)) return nullptr;
    const ByteSpan span = bytes_of(tensor);
    for (auto seen = seen_.rbegin(); seen != seen_.rend(); ++seen)
      if (same_device(seen->device, tensor.device) && seen->allocation.holds(span.begin, span.end)) return &*seen;
    return nullptr;
  }
  void add(const Endpoint& endpoint) {
    if (endpoint.allocation.begin == endpoint.allocation.end) return;
    if (seen_.size() == kKept) seen_.erase(seen_.begin());
    seen_.push_back(endpoint);
  }

 private:
  static constexpr std::size_t kKept = 8;  // the most recent: a batch's sources come in runs
  std::vector<Endpoint> seen_;
};

// The report's words for a batch's pipelines ("" for none): those that ran, and
// the tensors moved one by one because the pinned pool refused theirs.
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

}  // namespace

// One move of a batch, in the caller's order.
struct Runtime::OrderedMove {
  const Plan* plan;
  const Layout* src;
  const Layout* dst;
  bool gather;           // a small read into new host memory: landed in a pinned block, copied out after one wait
  uintptr_t allocation;  // a gathered read's source allocation (0: unknown): reads next to each other in one merge
  bool in_place;         // a gathered read straight into its page-locked result: no landing, copy out or wait
  bool joins;            // in place, in one copy with the read before it (plan_batch placed it so)
};

namespace {

// Refuses a batch the phases cannot take: too many, a NULL source, or one source twice
// (it would be consumed, and deleted, twice).
void check_sources(DLManagedTensorVersioned* const* srcs, std::size_t count) {
  if (count > kMaxBatch) fail(ABR_ERR_INVALID_ARGUMENT, "count = {}: at most {} tensors per call", count, kMaxBatch);
  for (std::size_t i = 0; i < count; ++i)
    if (!srcs[i]) fail(ABR_ERR_INVALID_ARGUMENT, "srcs[{}] is NULL", i);
  // Addresses alone sort in half the time of (address, index) pairs; a repeat found, its indices are looked up.
  // Headers made one after another are often in address order already: no sort then.
  std::vector<const void*> seen(srcs, srcs + count);
  if (!std::is_sorted(seen.begin(), seen.end())) std::sort(seen.begin(), seen.end());
  const auto repeat = std::adjacent_find(seen.begin(), seen.end());
  if (repeat == seen.end()) return;
  const std::size_t first = static_cast<std::size_t>(std::find(srcs, srcs + count, *repeat) - srcs);
  const std::size_t second = static_cast<std::size_t>(std::find(srcs + first + 1, srcs + count, *repeat) - srcs);
  fail(ABR_ERR_INVALID_ARGUMENT, "srcs[{}] and srcs[{}] are the same tensor; each source is consumed once", first,
       second);
}

// An error of the batch's item `i`, naming it.
Error of_item(std::size_t i, const Error& e) {
  return Error(e.status(), fmt::format("srcs[{}]: {}", i, e.what()), e.backend_code());
}

}  // namespace

// One abr_to_device_many call in flight: its items and what its phases hand on.
struct Runtime::Batch {
  Batch(DLManagedTensorVersioned* const* sources, std::size_t n, DLDevice device, Stream* on)
      : srcs(sources), count(n), dst(device), stream(on), items(n), data(n, nullptr), reads_in_place(on != nullptr) {}
  DLManagedTensorVersioned* const* srcs;
  std::size_t count;
  DLDevice dst;
  Stream* stream;
  Endpoint to;
  TransferOptions opts;
  std::vector<BatchItem> items;
  std::vector<void*> data;            // a copy's own memory
  uint64_t locked_room = UINT64_MAX;  // page-locked memory left for results: asked of the pool once, when needed
  // Small reads from a device land straight in page-locked results (no pinned landing,
  // copy out or host wait), where every one is on the caller's stream of one context
  // whose backend makes page-locked host memory (of type locked_type).
  bool reads_in_place;
  DLDeviceType locked_type = static_cast<DLDeviceType>(0);
  const void* read_context = nullptr;
  // Whether a source's results may be page-locked depends, within one batch (one
  // stream, one destination), on its device (its kind: backend and host or not) and
  // context alone: asked again only when they change (a device lookup and a
  // dynamic_cast a tensor).
  struct {
    DLDevice device{};
    const void* context = nullptr;
    bool locks = false, known = false;
  } last_locks;
  BatchPlan placed;                // plan_batch's places
  std::shared_ptr<Storage> block;  // the coalesced block
  void* block_handle = nullptr;
  std::shared_ptr<Storage> results_block;  // the gathered reads' results
  char* results_data = nullptr;
  bool in_place = false;               // those reads land straight in the results block (page-locked)
  std::unique_ptr<HeldByStream> held;  // with a stream: its room made before any work, so that the commit cannot fail
  std::size_t one_by_one = 0;          // streamed items moved alone, the pinned pool refusing their pipeline
  uint32_t joined = 0;                 // gathered reads moved in another's copy
};

void Runtime::to_device_many(DLManagedTensorVersioned* const* srcs, std::size_t count, DLDevice dst,
                             const abr_transfer_options* options, Stream* stream, DLManagedTensorVersioned** out,
                             abr_batch_report& report) {
  releases_->collect();
  check_sources(srcs, count);
  Batch batch(srcs, count, dst, stream);
  // Until the commit, every source stays the caller's, whatever fails.
  struct KeepSources {
    std::vector<BatchItem>& items;
    bool committed = false;
    ~KeepSources() {
      if (committed) return;
      for (BatchItem& item : items)
        if (item.source) item.source->give_back();
    }
  } keep{batch.items};
  plan_items(batch, options);
  place_items(batch);
  prepare_results(batch);
  move_items(batch);
  describe_batch(batch, report);
  keep.committed = true;
  commit_batch(batch, out);
}

// 1. Plan. The destination is resolved once; each source names its index when it fails.
void Runtime::plan_items(Batch& batch, const abr_transfer_options* options) {
  TransferOptions& opts = batch.opts;
  opts = resolve_options(options);
  opts.report = nullptr;
  opts.describe = false;  // each item's plan: the batch's report has words of its own
  opts.staging = staging_choice();
  batch.to = endpoint_for(batch.dst);
  const Endpoint& to = batch.to;
  const DLDataType target_dtype = opts.dtype;  // all zero (itemsize 0): each source's own
  CheckedAllocations checked;
  const auto locks_for = [&](const Endpoint& from) {
    auto& last = batch.last_locks;
    if (!last.known || last.context != from.context || !same_device(last.device, from.device))
      last = {from.device, from.context, results_may_be_locked(from, batch.dst, batch.stream), true};
    return last.locks;
  };
  for (std::size_t i = 0; i < batch.count; ++i) {
    BatchItem& item = batch.items[i];
    DLManagedTensorVersioned* src = batch.srcs[i];
    try {
      item.source.emplace(src);
      validate_header(*src, "source");
      opts.source_reads_as_view = reads_as_a_view(*src);
      item.src = validate_tensor(src->dl_tensor, Role::Source, "source");
      const uint64_t largest_item = std::max<uint64_t>(item.src.itemsize, itemsize(target_dtype));
      const bool ask_pinned = !packed_anyway(item.src.numel * largest_item, to);
      const Endpoint* known = checked.covering(item.src);
      const Endpoint from = known ? *known : endpoint_of(item.src, batch.dst, "source", ask_pinned);
      if (!known) checked.add(from);
      opts.locked_result_budget = 0;
      const bool locks = locks_for(from);
      if (locks) {
        if (batch.locked_room == UINT64_MAX) batch.locked_room = locked_result_room();
        opts.locked_result_budget = batch.locked_room;
      }
      item.plan = plan_transfer(item.src, from, to, opts);
      if (item.plan.path == ABR_PATH_DEVICE_TO_HOST && item.plan.pageable_bytes) {  // gathered, if small
        batch.reads_in_place =
            batch.reads_in_place && locks && (!batch.read_context || batch.read_context == from.context);
        batch.read_context = from.context;
        batch.locked_type = from.can.locked_host;
      }
      check_stream(batch.stream, item.src.device, batch.dst);
      if (item.plan.locked_result) {
        DeviceMemory locked = locked_result_or_replan(item.plan, item.src, from, to, opts, batch.stream);
        if (locked.storage) {
          batch.locked_room -= item.src.numel * itemsize(item.plan.dtype);
          batch.data[i] = locked.handle;
          item.memory = std::move(locked.storage);
        } else {
          batch.locked_room = 0;  // refused: the rest are not asked for, nor use the pool's blocks (opts.pinned_blocks)
        }
      }
      if (item.plan.move != Move::View) item.bytes = item.src.numel * itemsize(item.plan.dtype);
      item.allocation = from.allocation.begin;
      item.source_at = reinterpret_cast<uintptr_t>(first_element(item.src));
    } catch (const Error& e) {
      throw of_item(i, e);
    }
  }
}

// 2. Place: the batch planner's places, the coalesced block, and the gathered reads'
// results: one block, page-locked where they are read in place and the pool allows it
// (results take at most half of it), else plain memory.
void Runtime::place_items(Batch& batch) {
  std::vector<BatchEntry*> entries(batch.count);
  for (std::size_t i = 0; i < batch.count; ++i) entries[i] = &batch.items[i];
  batch.placed = plan_batch(entries, /*into_plain_host=*/!batch.to.backend, batch.opts.staging, batch.reads_in_place);
  const BatchPlan& placed = batch.placed;
  if (placed.coalesced) {
    if (DeviceBackend* backend = backend_of(batch.dst.device_type)) {
      DeviceMemory memory = backend->allocate(batch.dst, placed.block_bytes, batch.stream);
      batch.block_handle = memory.handle;
      batch.block = std::move(memory.storage);
    } else {  // new host memory
      auto buffer = std::make_shared<HostBuffer>(static_cast<std::size_t>(placed.block_bytes));
      batch.block_handle = buffer->data();
      batch.block = std::move(buffer);
    }
  }
  if (placed.results_bytes && batch.reads_in_place) {
    if (batch.locked_room == UINT64_MAX) batch.locked_room = locked_result_room();
    if (placed.results_bytes <= batch.locked_room) {
      try {
        DeviceMemory locked =
            backend_of(batch.locked_type)->allocate({batch.locked_type, 0}, placed.results_bytes, batch.stream);
        batch.results_data = static_cast<char*>(locked.handle);
        batch.results_block = std::move(locked.storage);
        batch.in_place = true;
      } catch (const Error& e) {
        if (e.status() != ABR_ERR_OUT_OF_MEMORY) throw;
        log::debug("a batch's {} bytes of small results in pageable memory: {}", placed.results_bytes, e.what());
      }
    }
  }
  if (placed.results_bytes && !batch.in_place) {
    auto buffer = std::make_shared<HostBuffer>(static_cast<std::size_t>(placed.results_bytes));
    batch.results_data = buffer->data();
    batch.results_block = std::move(buffer);
  }
}

// 2a. Every result's memory and header, before any work.
void Runtime::prepare_results(Batch& batch) {
  const DLDevice dst = batch.dst;
  const bool direct = is_direct_address(dst.device_type);
  for (std::size_t i = 0; i < batch.count; ++i) {
    BatchItem& item = batch.items[i];
    const Layout& src = item.src;
    const Plan& plan = item.plan;
    const uint64_t read_only = batch.srcs[i]->flags & DLPACK_FLAG_BITMASK_READ_ONLY;
    try {
      if (item.coalesced) {
        char* slot = static_cast<char*>(batch.block_handle) + item.offset;
        item.pending.emplace(ExportSpec{direct ? slot : batch.block_handle, dst, plan.dtype, src.shape,
                                        compact_strides(src.shape), direct ? 0 : item.offset,
                                        DLPACK_FLAG_BITMASK_IS_COPIED});
        item.shared = batch.block;
      } else if (item.in_results_block) {
        batch.data[i] = batch.results_data + item.offset;
        item.pending.emplace(ExportSpec{batch.data[i], dst, plan.dtype, src.shape, compact_strides(src.shape), 0,
                                        DLPACK_FLAG_BITMASK_IS_COPIED});
        item.shared = batch.results_block;
      } else if (plan.move != Move::View) {  // a copy of its own, as abr_to_device makes it
        if (!item.memory) {                  // page-locked memory is made with the plan
          DeviceMemory memory = new_result_memory(dst, item.bytes, batch.stream);
          batch.data[i] = memory.handle;
          item.memory = std::move(memory.storage);
        }
        item.pending.emplace(ExportSpec{batch.data[i], dst, plan.dtype, src.shape, compact_strides(src.shape), 0,
                                        DLPACK_FLAG_BITMASK_IS_COPIED});
        if (batch.stream) item.shared = std::move(item.memory);  // the stream holds it too
      } else if (plan.path == ABR_PATH_HOST_WRAP) {              // host memory the device uses in place
        item.pending.emplace(ExportSpec{nullptr, dst, src.dtype, src.shape, src.strides,
                                        static_cast<uint64_t>(-src.min_byte), read_only});
        auto owner = std::make_unique<DeferredSource>();
        item.wrap_owner = owner.get();
        std::unique_ptr<Storage> owning = std::move(owner);
        char* base = const_cast<char*>(first_element(src)) + src.min_byte;
        DeviceMemory memory =
            backend_of(dst.device_type)
                ->wrap_host(dst, base, static_cast<uint64_t>(src.max_byte_end - src.min_byte), read_only != 0, owning);
        item.pending->set_data(memory.handle);
        item.memory = std::move(memory.storage);
      } else if (!plan.hand_back) {  // a new header over the source's memory
        item.pending.emplace(ExportSpec{direct ? const_cast<char*>(first_element(src)) : src.data, dst, src.dtype,
                                        src.shape, src.strides, direct ? 0 : src.byte_offset, read_only});
      }
    } catch (const Error& e) {
      throw of_item(i, e);
    }
  }
  if (batch.stream) {
    batch.held = std::make_unique<HeldByStream>();
    batch.held->sources.reserve(batch.count);
    batch.held->memory.reserve(batch.count + 2);  // each copy's memory, the block and the results block
  }
}

// 2b. The moves. After a failure here, work queued on the stream may still read the
// sources: it is waited for before they go back to the caller.
void Runtime::move_items(Batch& batch) {
  std::vector<Layout> results;  // the destinations of the moves below
  std::vector<OrderedMove> moves;
  std::vector<std::vector<OrderedMove>> pipelines(batch.placed.streamed.size());
  std::vector<std::size_t> item_of;  // each move's item
  results.reserve(batch.count);
  for (std::size_t i = 0; i < batch.count; ++i) {
    const BatchItem& item = batch.items[i];
    if (item.coalesced || item.plan.move == Move::View) continue;
    results.push_back(compact_layout(batch.dst, item.plan.dtype, item.src.shape, batch.data[i]));
    const bool read_in_place = batch.in_place && item.in_results_block;
    const OrderedMove move{&item.plan,
                           &item.src,
                           &results.back(),
                           item.gather,
                           item.allocation,
                           read_in_place,
                           read_in_place && item.joins};
    if (item.streamed) {
      pipelines[item.pipeline].push_back(move);
      continue;
    }
    moves.push_back(move);
    item_of.push_back(i);
  }
  Stream* stream = batch.stream;
  std::size_t at = batch.count;  // the item moving; count while the coalesced block or the streamed ones do
  const auto settle = [stream] {
    if (!stream) return;
    try {
      stream->synchronize();
    } catch (const std::exception&) {  // a failed stream runs nothing more
    }
  };
  try {
    if (batch.placed.coalesced)
      move_coalesced(batch.items, batch.dst, batch.to, batch.block_handle, batch.placed.block_bytes,
                     batch.placed.pack_threads, stream);
    batch.one_by_one = move_pipelines(pipelines, batch.placed.streamed, "srcs[{}]", stream);
    std::size_t move = 0;
    try {
      move_in_order(moves, stream, move, batch.joined, batch.placed.copy_out_threads);
    } catch (const Error&) {
      if (move < moves.size()) at = item_of[move];
      throw;
    }
  } catch (const Error& e) {
    settle();
    if (at == batch.count) throw;  // the coalesced move: it names no one source
    throw of_item(at, e);
  } catch (...) {  // out of memory in a container, say: what was queued may still read the sources
    settle();
    throw;
  }
}

// The report, before the commit (formatting can fail, the commit cannot).
void Runtime::describe_batch(const Batch& batch, abr_batch_report& report) {
  const std::size_t coalesced = batch.placed.coalesced;
  uint32_t views = 0, copies = coalesced ? 1 : 0;
  uint64_t moved = 0;
  for (const BatchItem& item : batch.items) {
    moved += item.bytes;
    if (item.plan.move == Move::View)
      ++views;
    else if (!item.coalesced)
      ++copies;
  }
  copies -= batch.joined;
  report.tensors = static_cast<uint32_t>(batch.count);
  report.coalesced = static_cast<uint32_t>(coalesced);
  report.views = views;
  report.copies = copies;
  report.bytes_moved = moved;
  try {  // the work is done or queued: a failure to put it into words must not undo it
    const BatchPlan& placed = batch.placed;
    std::string detail = coalesced
        ? fmt::format("{} of {} tensors packed into one {} byte block{}{}; {} view(s), {} other copy(ies)", coalesced,
                      batch.count, placed.block_bytes,
                      placed.pack_threads > 1 ? fmt::format(" on {} threads", placed.pack_threads) : "",
                      backend_of(batch.dst.device_type) ? " and moved with one copy" : "", views, copies - 1)
        : fmt::format("{} tensors: {} view(s), {} copy(ies), none coalesced", batch.count, views, copies);
    detail += streamed_words(placed.streamed, batch.one_by_one);
    if (batch.joined)
      detail += fmt::format("; {} small read(s) joined a neighbour's copy in one allocation", batch.joined);
    if (batch.in_place)
      detail += "; small reads straight into page-locked results";
    else if (placed.copy_out_threads > 1)
      detail += fmt::format("; small reads copied out of pinned memory on {} threads", placed.copy_out_threads);
    fit_text(report.detail, sizeof report.detail, detail);
  } catch (const std::exception&) {
    fit_text(report.detail, sizeof report.detail, "a batch (its detail could not be formatted)");
  }
}

// 3. Commit: nothing here throws. Headers finished, sources handed to their results,
// released, or kept by the stream until its work is done.
void Runtime::commit_batch(Batch& batch, DLManagedTensorVersioned** out) {
  std::unique_ptr<HeldByStream> held = std::move(batch.held);
  for (std::size_t i = 0; i < batch.count; ++i) {
    BatchItem& item = batch.items[i];
    if (item.plan.hand_back) {
      out[i] = item.source->take_versioned();
    } else if (item.wrap_owner) {
      item.wrap_owner->source.emplace(std::move(*item.source));
      out[i] = item.pending->finish(std::move(item.memory));
    } else if (item.plan.move == Move::View) {
      out[i] = item.pending->finish(*item.source);
    } else {
      if (held && item.shared && !item.coalesced && !item.in_results_block) held->memory.push_back(item.shared);
      out[i] = item.shared ? item.pending->finish_shared(std::move(item.shared))
                           : item.pending->finish(std::move(item.memory));
      if (held)
        held->sources.push_back(std::move(*item.source));  // until the work that reads it is done
      else
        item.source->call_deleter();
    }
  }
  if (held) {
    if (batch.block) held->memory.push_back(std::move(batch.block));
    if (batch.in_place) held->memory.push_back(std::move(batch.results_block));  // read into by the stream's DMAs
    batch.stream->retain(std::move(held));
  }
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
                             uint64_t bytes, unsigned threads, Stream* stream) {
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
  if (!to.backend) return pack_all(static_cast<char*>(block));  // new host memory: the host engine alone
  const Layout whole = compact_layout(dst, DLDataType{kDLUInt, 8, 1}, Dims{static_cast<int64_t>(bytes)}, block);
  std::unique_ptr<Submission> work = submit_routed(*to.backend, dst, to.context, stream);
  if (to.can.maps_to_host) {
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
    if (move.gather && move.in_place) {
      const auto begin = reinterpret_cast<uintptr_t>(first_element(*move.src));
      const bool extends = move.joins && run.first && run.in_place;  // else its own copy, into its own place
      if (!extends) {
        queue_run();
        run = {move.src, at, move.allocation, begin, begin, const_cast<char*>(first_element(*move.dst)), 0, true};
      }
      run.end = begin + static_cast<std::size_t>(move.src->numel * move.dst->itemsize);
      joined += extends ? 1 : 0;
    } else if (move.gather) {
      const std::size_t n = static_cast<std::size_t>(move.src->numel * move.dst->itemsize);
      const auto begin = reinterpret_cast<uintptr_t>(first_element(*move.src));  // compact: its first byte
      const bool joins = run.first && move.allocation && move.allocation == run.allocation && begin >= run.end &&
          begin - run.end <= kJoinGap && begin + n - run.begin <= run.room;
      if (!joins) {
        queue_run();
        const auto slot = static_cast<std::size_t>(batch_slot(n));
        if (slot > landing_left) {
          landing_left = std::max(slot, kLandingBlock);
          landing = open->pinned(landing_left);
        }
        run = {move.src, at, move.allocation, begin, begin, landing, move.allocation ? landing_left : slot, false};
      }
      landed.push_back({run.landing + (begin - run.begin), const_cast<char*>(first_element(*move.dst)), n});
      run.end = begin + n;
      joined += joins ? 1 : 0;
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

// abr_copy_many: every pair validated and planned before anything moves. Pageable
// pairs to or from one device context that no other pair's order matters to are
// streamed through one pipeline first (plan_copy_batch); then the rest in order.
// Consecutive moves on one device context share one submission, finished when the
// next pair is elsewhere (another context, the host engine, the pipeline, a peer
// copy) and at the end; before a host-side step the caller's stream is waited for
// too, so every pair sees the ones before it.
void Runtime::copy_many(const DLTensor* const* srcs, const DLTensor* const* dsts, std::size_t count,
                        const abr_transfer_options* options, Stream* stream, abr_batch_report& report) {
  releases_->collect();
  if (count > kMaxBatch) fail(ABR_ERR_INVALID_ARGUMENT, "count = {}: at most {} pairs per call", count, kMaxBatch);
  TransferOptions opts = resolve_options(options);
  opts.report = nullptr;
  opts.describe = false;
  opts.staging = staging_choice();
  struct Pair : BatchEntry {
    Layout src, dst;
  };
  std::vector<Pair> pairs(count);
  CheckedAllocations checked;
  bool by_address = true;  // every pair's memory known by its address: the order check can see overlaps
  for (std::size_t i = 0; i < count; ++i) {
    try {
      if (!srcs[i] || !dsts[i])
        fail(ABR_ERR_INVALID_ARGUMENT, "{} is NULL", srcs[i] ? "the destination" : "the source");
      Pair& pair = pairs[i];
      pair.src = validate_tensor(*srcs[i], Role::Source, "source");
      pair.dst = validate_tensor(*dsts[i], Role::Destination, "destination");
      const Endpoint* known_src = checked.covering(pair.src);
      const Endpoint from = known_src ? *known_src : endpoint_of(pair.src, pair.dst.device, "source");
      if (!known_src) checked.add(from);
      const Endpoint* known_dst = checked.covering(pair.dst);
      const Endpoint to = known_dst ? *known_dst : endpoint_of(pair.dst, pair.src.device, "destination");
      if (!known_dst) checked.add(to);
      pair.plan = plan_copy(pair.src, from, pair.dst, to, opts);
      check_stream(stream, pair.src.device, pair.dst.device);
      pair.bytes = pair.src.numel * pair.dst.itemsize;
      by_address = by_address && is_direct_address(pair.src.device.device_type) &&
          is_direct_address(pair.dst.device.device_type);
    } catch (const Error& e) {
      throw Error(e.status(), fmt::format("pair {}: {}", i, e.what()), e.backend_code());
    }
  }

  std::vector<BatchEntry*> entries(count);
  std::vector<CopySpans> spans;  // none: nothing streams
  if (by_address) spans.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    entries[i] = &pairs[i];
    if (by_address) spans.push_back({bytes_of(pairs[i].src), bytes_of(pairs[i].dst)});
  }
  std::vector<StreamedPipeline> streamed = plan_copy_batch(entries, spans, opts.staging);

  std::vector<OrderedMove> moves;
  std::vector<std::vector<OrderedMove>> pipelines(streamed.size());
  std::vector<std::size_t> pair_of;  // each ordered move's pair
  moves.reserve(count);
  uint64_t moved = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const Pair& pair = pairs[i];
    moved += pair.bytes;
    // Never gathered: a later pair may read or write a destination, which must hold
    // its bytes by then (a gathered read lands only at the submission's end).
    const OrderedMove move{&pair.plan, &pair.src, &pair.dst, /*gather=*/false, /*allocation=*/0, false, false};
    if (pair.streamed) {
      pipelines[pair.pipeline].push_back(move);
      continue;
    }
    moves.push_back(move);
    pair_of.push_back(i);
  }
  const std::size_t one_by_one = move_pipelines(pipelines, streamed, "pair {}", stream);
  std::size_t at = 0;
  uint32_t submissions = 0, joined = 0;  // no pair is gathered, so none joins another's read
  try {
    submissions = move_in_order(moves, stream, at, joined);
  } catch (const Error& e) {
    if (at == moves.size()) throw;  // the last submission's wait: no one pair
    throw Error(e.status(), fmt::format("pair {}: {}", pair_of[at], e.what()), e.backend_code());
  }
  report.tensors = static_cast<uint32_t>(count);
  report.copies = static_cast<uint32_t>(count);
  report.bytes_moved = moved;
  fit_text(report.detail, sizeof report.detail,
           fmt::format("{} copies; the device moves in {} submission(s){}", count, submissions,
                       streamed_words(streamed, one_by_one)));
}

}  // namespace abr
