// What abr_to_device_many's phases (batch.cpp), a batch's moves (batch_moves.cpp) and
// abr_copy_many (copy_many.cpp) share: a batch's items, its moves in order, and the
// device allocations it has checked. Private to lib/run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/plan/batch_plan.hpp"
#include "lib/run/runtime.hpp"

namespace abr {

inline constexpr std::size_t kMaxBatch = std::size_t{1} << 24;

class DeferredSource;  // batch.cpp: the source a host wrap keeps alive, given to it at commit

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

// One move of a batch, in the caller's order.
struct Runtime::OrderedMove {
  const Plan* plan;
  const Layout* src;
  const Layout* dst;
  bool gather;           // a small read into new host memory: landed in a pinned block, copied out after one wait
  uintptr_t allocation;  // a gathered read's source allocation (0: unknown): reads next to each other in one merge
  bool in_place;         // a gathered read straight into its page-locked result: no landing, copy out or wait
  bool joins;            // gathered, in one copy with the read before it (plan_batch's run)
};

// The bytes a tensor in memory known by its address spans (none for no element;
// min_byte <= 0 wraps back).
inline ByteSpan bytes_of(const Layout& tensor) {
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
std::string streamed_words(const std::vector<StreamedPipeline>& pipelines, std::size_t one_by_one);

}  // namespace abr
