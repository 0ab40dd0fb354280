// The batch planner on its own, with made-up plans: which of a batch's results are
// coalesced, gathered or streamed, their slots, and the blocks' sizes.
#include <doctest/doctest.h>

#include <deque>
#include <vector>

#include "lib/batch_plan.hpp"

namespace {

using abr::BatchEntry;

const abr::StagingChoice kMiBChunks{1, uint64_t{1} << 20};  // 1 MiB chunks: two make a stream

struct Batch {
  std::deque<BatchEntry> entries;  // stable addresses
  std::vector<BatchEntry*> pointers;
  BatchEntry& add(abr_path path, uint64_t bytes, bool pageable = false, const void* src_context = nullptr,
                  const void* dst_context = nullptr) {
    BatchEntry& entry = entries.emplace_back();
    entry.plan.path = path;
    entry.plan.pageable_bytes = pageable;
    entry.plan.src_context = const_cast<void*>(src_context);
    entry.plan.dst_context = const_cast<void*>(dst_context);
    entry.bytes = bytes;
    pointers.push_back(&entry);
    return entry;
  }
};

const char kDevice = 0, kOtherDevice = 0;

}  // namespace

TEST_CASE("plan_batch: small copies from host memory share one block, in 256-byte slots, up to 16 MiB") {
  Batch batch;
  BatchEntry& a = batch.add(ABR_PATH_HOST_TO_DEVICE, 1000);
  BatchEntry& view = batch.add(ABR_PATH_ZERO_COPY, 0);
  BatchEntry& b = batch.add(ABR_PATH_HOST_TO_DEVICE, 4096);
  BatchEntry& large = batch.add(ABR_PATH_HOST_TO_DEVICE, abr::kCoalesceMax + 1);
  const abr::BatchPlan plan = abr::plan_batch(batch.pointers, /*into_plain_host=*/false, kMiBChunks);
  CHECK(plan.coalesced == 2);
  CHECK(a.coalesced);
  CHECK(a.offset == 0);
  CHECK(b.coalesced);
  CHECK(b.offset == 1024);  // 1000 rounded up to 256
  CHECK(plan.block_bytes == 1024 + 4096);
  CHECK_FALSE(view.coalesced);
  CHECK_FALSE(large.coalesced);
  CHECK(plan.results_bytes == 0);
  CHECK(plan.streamed.empty());

  Batch full;  // 300 x 64 KiB: 256 fill the block, the rest go their own way
  for (int i = 0; i < 300; ++i) full.add(ABR_PATH_HOST_TO_DEVICE, abr::kCoalesceMax);
  const abr::BatchPlan packed = abr::plan_batch(full.pointers, false, kMiBChunks);
  CHECK(packed.coalesced == abr::kBlockMax / abr::kCoalesceMax);
  CHECK(packed.block_bytes == abr::kBlockMax);
  CHECK(full.entries[255].coalesced);
  CHECK_FALSE(full.entries[256].coalesced);
}

TEST_CASE("plan_batch: a host copy is coalesced only into plain host memory") {
  Batch batch;
  BatchEntry& copy = batch.add(ABR_PATH_HOST_COPY, 4096);
  CHECK(abr::plan_batch(batch.pointers, /*into_plain_host=*/false, kMiBChunks).coalesced == 0);  // cuda_host
  CHECK_FALSE(copy.coalesced);
  CHECK(abr::plan_batch(batch.pointers, /*into_plain_host=*/true, kMiBChunks).coalesced == 1);
  CHECK(copy.coalesced);
}

TEST_CASE("plan_batch: small reads of pageable bytes are gathered into slots of one results block") {
  Batch batch;
  BatchEntry& a = batch.add(ABR_PATH_DEVICE_TO_HOST, 100, /*pageable=*/true, &kDevice);
  BatchEntry& pinned = batch.add(ABR_PATH_DEVICE_TO_HOST, 100, /*pageable=*/false, &kDevice);  // one DMA already
  BatchEntry& b = batch.add(ABR_PATH_DEVICE_TO_HOST, 300, true, &kDevice);
  BatchEntry& large = batch.add(ABR_PATH_DEVICE_TO_HOST, abr::kCoalesceMax + 1, true, &kDevice);
  const abr::BatchPlan plan = abr::plan_batch(batch.pointers, /*into_plain_host=*/true, kMiBChunks);
  CHECK(plan.coalesced == 0);
  CHECK(a.gather);
  CHECK(a.in_results_block);
  CHECK(a.offset == 0);
  CHECK(b.in_results_block);
  CHECK(b.offset == 256);
  CHECK(plan.results_bytes == 256 + 512);
  CHECK_FALSE(pinned.gather);
  CHECK_FALSE(large.gather);
  CHECK(plan.streamed.empty());  // one large read: nothing to stream with

  Batch many;  // past 16 MiB of results the reads are still gathered, into buffers of their own
  for (int i = 0; i < 257; ++i) many.add(ABR_PATH_DEVICE_TO_HOST, abr::kCoalesceMax, true, &kDevice);
  CHECK(abr::plan_batch(many.pointers, true, kMiBChunks).results_bytes == abr::kBlockMax);
  CHECK(many.entries[256].gather);
  CHECK_FALSE(many.entries[256].in_results_block);
}

TEST_CASE("plan_batch: larger pageable copies to one device stream together, from two chunks and two tensors") {
  Batch batch;
  const uint64_t mib = uint64_t{1} << 20;
  BatchEntry& a = batch.add(ABR_PATH_STAGED, 3 * mib / 2, true, nullptr, &kDevice);
  batch.add(ABR_PATH_HOST_TO_DEVICE, 4096, false, nullptr, &kDevice);  // coalesced
  BatchEntry& other = batch.add(ABR_PATH_HOST_TO_DEVICE, mib, true, nullptr, &kOtherDevice);
  BatchEntry& b = batch.add(ABR_PATH_HOST_TO_DEVICE, mib, true, nullptr, &kDevice);
  BatchEntry& locked = batch.add(ABR_PATH_HOST_TO_DEVICE, mib, false, nullptr, &kDevice);  // page-locked: one DMA
  const abr::BatchPlan plan = abr::plan_batch(batch.pointers, false, kMiBChunks);
  CHECK(plan.streamed == std::vector<std::size_t>{0, 3});
  CHECK(a.streamed);
  CHECK(b.streamed);
  CHECK_FALSE(other.streamed);  // another device moves its own way
  CHECK_FALSE(locked.streamed);
  CHECK(plan.coalesced == 1);

  Batch alone;  // one tensor, however large, is a transfer of its own
  alone.add(ABR_PATH_STAGED, 64 * mib, true, nullptr, &kDevice);
  CHECK(abr::plan_batch(alone.pointers, false, kMiBChunks).streamed.empty());

  Batch under;  // two tensors under two chunks together: one driver copy each
  under.add(ABR_PATH_HOST_TO_DEVICE, abr::kCoalesceMax + 1, true, nullptr, &kDevice);
  under.add(ABR_PATH_HOST_TO_DEVICE, abr::kCoalesceMax + 1, true, nullptr, &kDevice);
  CHECK(abr::plan_batch(under.pointers, false, kMiBChunks).streamed.empty());
  CHECK_FALSE(under.entries[0].streamed);
}
