// abr_to_device_many: many tensors to one device in one call. It runs in phases on
// one Batch, so that a failure anywhere leaves every source the caller's and hands
// nothing out:
//  1. plan_items: each source validated and planned against one destination endpoint;
//  2. place_items, prepare_results, move_items: the batch placed (plan_batch:
//     coalesced, gathered or streamed), every result's memory and header allocated,
//     then the work (batch_moves.cpp; after a failure the stream is waited for before
//     the sources go back); describe_batch puts it into the report's words;
//  3. commit_batch (cannot fail): headers finished, sources handed to their results,
//     released, or kept by the stream until its work is done.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/base/log.hpp"
#include "lib/base/text.hpp"
#include "lib/memory/host_buffer.hpp"
#include "lib/run/batch_items.hpp"
#include "lib/run/device_moves.hpp"
#include "lib/tensor/dtype.hpp"

namespace abr {
namespace {

// What the caller's stream holds until the batch's work is done, in one piece:
// the sources that work reads and its share of the results' memory.
class HeldByStream final : public Storage {
 public:
  std::vector<SourceTensor> sources;
  std::vector<std::shared_ptr<Storage>> memory;
};

}  // namespace

// The source a host wrap keeps alive, given to it only at commit: until then a
// failure frees the wrap without running the source's deleter. (Outside the unnamed
// namespace: a BatchItem, batch_items.hpp, points to one.)
class DeferredSource final : public Storage {
 public:
  std::optional<SourceTensor> source;
};

namespace {

// Refuses a batch the phases cannot take: a NULL source, or one source twice (it would be
// consumed, and deleted, twice).
void check_sources(DLManagedTensorVersioned* const* srcs, std::size_t count) {
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
      : srcs(sources), count(n), dst(device), stream(on), items(n), data(n, nullptr) {}
  DLManagedTensorVersioned* const* srcs;
  std::size_t count;
  DLDevice dst;
  Stream* stream;
  Endpoint to;
  TransferOptions opts;
  std::vector<BatchItem> items;
  std::vector<void*> data;            // a copy's own memory
  uint64_t locked_room = UINT64_MAX;  // page-locked memory left for results: asked of the pool once, when needed
  // Whether a source's results may be page-locked depends, within one batch (one
  // stream, one destination), on its device (its kind: backend and host or not) and
  // context alone: asked again only when they change (a device lookup and a
  // dynamic_cast a tensor).
  struct {
    DLDevice device{};
    const void* context = nullptr;
    DLDeviceType locks = static_cast<DLDeviceType>(0);  // the page-locked memory its results may be made in
    bool known = false;
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

void Runtime::check_batch_count(std::size_t count, const char* what) {
  if (count > kMaxBatch) fail(ABR_ERR_INVALID_ARGUMENT, "count = {}: at most {} {} per call", count, kMaxBatch, what);
}

void Runtime::to_device_many(DLManagedTensorVersioned* const* srcs, std::size_t count, DLDevice dst,
                             const abr_transfer_options* options, Stream* stream, DLManagedTensorVersioned** out,
                             abr_batch_report& report) {
  check_batch_count(count, "tensors");
  collect_releases();
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
      last = {from.device, from.context, lockable_result_type(from, batch.dst, batch.stream), true};
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
      const DLDeviceType locks = item.locks = locks_for(from);
      if (locks != 0) {
        if (batch.locked_room == UINT64_MAX) batch.locked_room = locked_result_room();
        opts.locked_result_budget = batch.locked_room;
      }
      item.plan = plan_transfer(item.src, from, to, opts);
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
  batch.placed = plan_batch(entries, batch.to, batch.opts.staging);
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
  if (placed.results_bytes && placed.reads_in_place) {
    if (batch.locked_room == UINT64_MAX) batch.locked_room = locked_result_room();
    if (placed.results_bytes <= batch.locked_room) {
      try {
        DeviceMemory locked =
            backend_of(placed.locked_type)->allocate({placed.locked_type, 0}, placed.results_bytes, batch.stream);
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
    const OrderedMove move{&item.plan,      &item.src,     &results.back(), item.gather,
                           item.allocation, read_in_place, item.joins};
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
      move_coalesced(batch.items, batch.dst, batch.to, batch.block_handle, batch.placed, stream);
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
  if (report.paths)
    for (std::size_t i = 0; i < batch.count; ++i) report.paths[i] = batch.items[i].plan.path;
  if (report.result_flags)
    for (std::size_t i = 0; i < batch.count; ++i) report.result_flags[i] = batch.items[i].plan.report_flags();
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
                      placed.fill == BlockFill::Host         ? ""
                          : placed.fill == BlockFill::Mapped ? ", through one mapping of the device's memory"
                                                             : " and moved with one copy",
                      views, copies - 1)
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

}  // namespace abr
