// The batch planner on its own, with made-up plans: which of a batch's results are
// coalesced, gathered or streamed, their slots, and the blocks' sizes.
#include <doctest/doctest.h>

#include <deque>
#include <random>
#include <vector>

#include "lib/plan/batch_plan.hpp"

namespace {

using abr::BatchEntry;
using Pipelines = std::vector<std::vector<std::size_t>>;

// The entries of each pipeline, in order.
Pipelines items(const std::vector<abr::StreamedPipeline>& pipelines) {
  Pipelines out;
  for (const abr::StreamedPipeline& pipeline : pipelines) out.push_back(pipeline.items);
  return out;
}

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

// New host memory as a batch's destination (the fill these tests do not look at).
const abr::Endpoint kHost = [] {
  abr::Endpoint host;
  host.host = true;
  return host;
}();

}  // namespace

TEST_CASE("plan_batch decides how the coalesced block is filled, as plan_host_device moves one tensor") {
  Batch batch;
  batch.add(ABR_PATH_HOST_TO_DEVICE, 1000);
  abr::Endpoint host, mapped, dma;
  host.host = true;
  mapped.can.maps_to_host = true;  // OpenCL: the host engine packs through a mapping
  CHECK(abr::plan_batch(batch.pointers, host, kMiBChunks).fill == abr::BlockFill::Host);
  CHECK(abr::plan_batch(batch.pointers, mapped, kMiBChunks).fill == abr::BlockFill::Mapped);
  CHECK(abr::plan_batch(batch.pointers, dma, kMiBChunks).fill == abr::BlockFill::Pinned);  // CUDA
}

TEST_CASE("plan_batch: small copies from host memory share one block, in 256-byte slots, up to 16 MiB") {
  Batch batch;
  BatchEntry& a = batch.add(ABR_PATH_HOST_TO_DEVICE, 1000);
  BatchEntry& view = batch.add(ABR_PATH_ZERO_COPY, 0);
  BatchEntry& b = batch.add(ABR_PATH_HOST_TO_DEVICE, 4096);
  BatchEntry& large = batch.add(ABR_PATH_HOST_TO_DEVICE, abr::kCoalesceMax + 1);
  const abr::BatchPlan plan = abr::plan_batch(batch.pointers, kHost, kMiBChunks);
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
  const abr::BatchPlan packed = abr::plan_batch(full.pointers, kHost, kMiBChunks);
  CHECK(packed.coalesced == abr::kBlockMax / abr::kCoalesceMax);
  CHECK(packed.block_bytes == abr::kBlockMax);
  CHECK(full.entries[255].coalesced);
  CHECK_FALSE(full.entries[256].coalesced);
}

TEST_CASE("plan_batch: a coalesced block is packed on the threads a memcpy of its bytes is cut for") {
  const abr::StagingChoice four_threads{4, 0};
  Batch quarter;  // 256 x 4 KiB: 1 MiB, under two pieces, on the calling thread
  for (int i = 0; i < 256; ++i) quarter.add(ABR_PATH_HOST_TO_DEVICE, 4096);
  CHECK(abr::plan_batch(quarter.pointers, kHost, four_threads).pack_threads == 1);
  Batch thousand;  // 1000 x 4 KiB: 3.9 MiB, three pieces of a memcpy
  for (int i = 0; i < 1000; ++i) thousand.add(ABR_PATH_HOST_TO_DEVICE, 4096);
  CHECK(abr::plan_batch(thousand.pointers, kHost, four_threads).pack_threads == 3);
  CHECK(abr::plan_batch(thousand.pointers, kHost, abr::StagingChoice{2, 0}).pack_threads == 2);  // as many as asked
  Batch none;  // nothing coalesced: nothing packed
  none.add(ABR_PATH_HOST_TO_DEVICE, abr::kCoalesceMax + 1);
  CHECK(abr::plan_batch(none.pointers, kHost, four_threads).pack_threads == 1);
}

TEST_CASE("plan_batch: gathered reads are copied out on the threads a memcpy of their bytes is cut for") {
  const abr::StagingChoice four_threads{4, 0};
  Batch quarter;  // 256 x 4 KiB: 1 MiB, under two pieces, on the calling thread
  for (int i = 0; i < 256; ++i) quarter.add(ABR_PATH_DEVICE_TO_HOST, 4096, /*pageable=*/true, &kDevice);
  CHECK(abr::plan_batch(quarter.pointers, kHost, four_threads).copy_out_threads == 1);
  Batch thousand;  // 1000 x 4 KiB: 3.9 MiB, three pieces of a memcpy
  for (int i = 0; i < 1000; ++i) thousand.add(ABR_PATH_DEVICE_TO_HOST, 4096, true, &kDevice);
  CHECK(abr::plan_batch(thousand.pointers, kHost, four_threads).copy_out_threads == 3);
  CHECK(abr::plan_batch(thousand.pointers, kHost, abr::StagingChoice{2, 0}).copy_out_threads == 2);
  Batch pinned;  // reads into page-locked memory are one DMA each: nothing lands to copy out
  for (int i = 0; i < 1000; ++i) pinned.add(ABR_PATH_DEVICE_TO_HOST, 4096, /*pageable=*/false, &kDevice);
  CHECK(abr::plan_batch(pinned.pointers, kHost, four_threads).copy_out_threads == 1);
  Batch packed;  // small copies to a device are packed, not copied out
  for (int i = 0; i < 1000; ++i) packed.add(ABR_PATH_HOST_TO_DEVICE, 4096);
  CHECK(abr::plan_batch(packed.pointers, kHost, four_threads).copy_out_threads == 1);
}

TEST_CASE(
    "plan_batch: small host copies (into the CPU's memory or cuda_host) share one block as copies to a device do") {
  // cuda_host results of their own cost a pinned pool's lock and lookup each: 1000 x 4
  // KiB took 3.5x as long as the same batch into the CPU's memory (fake driver).
  Batch batch;
  BatchEntry& copy = batch.add(ABR_PATH_HOST_COPY, 4096);
  BatchEntry& other = batch.add(ABR_PATH_HOST_COPY, 100);
  BatchEntry& large = batch.add(ABR_PATH_HOST_COPY, abr::kCoalesceMax + 1);
  const abr::BatchPlan plan = abr::plan_batch(batch.pointers, kHost, kMiBChunks);
  CHECK(plan.coalesced == 2);
  CHECK(copy.coalesced);
  CHECK(other.coalesced);
  CHECK(other.offset == 4096);
  CHECK_FALSE(large.coalesced);
  CHECK(plan.block_bytes == 4096 + 256);
}

TEST_CASE("plan_batch: small reads of pageable bytes are gathered into slots of one results block") {
  Batch batch;
  BatchEntry& a = batch.add(ABR_PATH_DEVICE_TO_HOST, 100, /*pageable=*/true, &kDevice);
  BatchEntry& pinned = batch.add(ABR_PATH_DEVICE_TO_HOST, 100, /*pageable=*/false, &kDevice);  // one DMA already
  BatchEntry& b = batch.add(ABR_PATH_DEVICE_TO_HOST, 300, true, &kDevice);
  BatchEntry& large = batch.add(ABR_PATH_DEVICE_TO_HOST, abr::kCoalesceMax + 1, true, &kDevice);
  const abr::BatchPlan plan = abr::plan_batch(batch.pointers, kHost, kMiBChunks);
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
  CHECK(abr::plan_batch(many.pointers, kHost, kMiBChunks).results_bytes == abr::kBlockMax);
  CHECK(many.entries[256].gather);
  CHECK_FALSE(many.entries[256].in_results_block);
}

// A read that follows the one before it in its allocation, at most 512 bytes after its
// end, is one copy with it (joins). Read in place (page-locked results, no landing
// block), it joins only a multiple of 256 bytes from the run's start, and lies in the
// results as in the device's memory; any other starts a slot of its own. Every
// result is 256-byte aligned, as abr_to_device's is.
TEST_CASE("plan_batch: reads in place lie as their sources do where one copy can read them together") {
  const auto plan = [](bool in_place) {
    Batch batch;
    const auto locks = in_place ? kDLCUDAHost : static_cast<DLDeviceType>(0);
    const auto read = [&](uintptr_t allocation, uintptr_t at) {
      BatchEntry& entry = batch.add(ABR_PATH_DEVICE_TO_HOST, 1000, /*pageable=*/true, &kDevice);
      entry.allocation = allocation;
      entry.source_at = allocation + at;
      entry.locks = locks;
    };
    const uintptr_t one = uintptr_t{1} << 40, other = uintptr_t{1} << 41;
    read(one, 0);
    read(one, 1280);        // 280 bytes after: joins
    read(one, 2560);        // 280 after, 1280 on: joins
    read(one, 3560 + 513);  // 513 after: a slot of its own
    read(one, 5073 + 4);    // 4 after, but 1004 bytes on: would be misaligned, so its own
    read(one, 0);           // behind: its own
    read(other, 1000);      // another allocation: its own
    batch.add(ABR_PATH_DEVICE_TO_HOST, abr::kCoalesceMax + 1, true, &kDevice).locks = locks;  // a move between
    read(other, 2000);  // right after, but not in order of moves
    read(0, 0);         // an allocation not known
    read(0, 1000);
    const abr::BatchPlan placed = abr::plan_batch(batch.pointers, kHost, kMiBChunks);
    CHECK(placed.reads_in_place == in_place);
    CHECK(placed.locked_type == locks);
    std::vector<std::pair<uint64_t, bool>> out;
    for (const BatchEntry& entry : batch.entries)
      if (entry.in_results_block) out.emplace_back(entry.offset, entry.joins);
    return std::make_pair(out, placed.results_bytes);
  };
  using Placed = std::vector<std::pair<uint64_t, bool>>;
  const auto [in_place, in_place_bytes] = plan(true);
  CHECK(in_place ==
        Placed{{0, false},
               {1280, true},
               {2560, true},
               {3584, false},  // at the 256-byte boundary after the run's end
               {4608, false},
               {5632, false},
               {6656, false},
               {7680, false},
               {8704, false},
               {9728, false}});
  CHECK(in_place_bytes == 10752);
  // Landing blocks, copied out: 1 KiB slots in order, and runs joined without the 256-byte rule.
  const auto [slots, slots_bytes] = plan(false);
  CHECK(slots ==
        Placed{{0, false},
               {1024, true},
               {2048, true},
               {3072, false},
               {4096, true},  // 4 bytes after: one copy, each copied out to its own slot
               {5120, false},
               {6144, false},
               {7168, false},
               {8192, false},
               {9216, false}});
  CHECK(slots_bytes == 10240);
}

// Reads land in page-locked results only where every read into pageable memory may
// have one (lockable_result_type: the backend makes it and the caller's stream orders
// the work) and all come from one device context.
TEST_CASE("plan_batch: reads land in place only where every read may, from one context") {
  const char other_context = 0;
  const auto placed = [](std::initializer_list<std::pair<DLDeviceType, const void*>> reads) {
    Batch batch;
    batch.add(ABR_PATH_HOST_TO_DEVICE, 1000);  // not a read: no say
    for (const auto& [locks, context] : reads) batch.add(ABR_PATH_DEVICE_TO_HOST, 1000, true, context).locks = locks;
    batch.add(ABR_PATH_DEVICE_TO_HOST, 1000, false, &kDevice);  // into page-locked memory already: no say
    const abr::BatchPlan plan = abr::plan_batch(batch.pointers, kHost, kMiBChunks);
    return std::make_pair(plan.reads_in_place, plan.locked_type);
  };
  using Placed = std::pair<bool, DLDeviceType>;
  const DLDeviceType none = static_cast<DLDeviceType>(0);
  CHECK(placed({{kDLCUDAHost, &kDevice}, {kDLCUDAHost, &kDevice}}) == Placed{true, kDLCUDAHost});
  CHECK(placed({{kDLCUDAHost, &kDevice}, {none, &kDevice}}) == Placed{false, none});  // one may not
  CHECK(placed({{kDLCUDAHost, &kDevice}, {kDLCUDAHost, &other_context}}) == Placed{false, none});
  CHECK(placed({}) == Placed{false, none});  // no reads
}

TEST_CASE("plan_batch: larger pageable copies to one device stream together, from two chunks and two tensors") {
  Batch batch;
  const uint64_t mib = uint64_t{1} << 20;
  BatchEntry& a = batch.add(ABR_PATH_STAGED, 3 * mib / 2, true, nullptr, &kDevice);
  batch.add(ABR_PATH_HOST_TO_DEVICE, 4096, false, nullptr, &kDevice);  // coalesced
  BatchEntry& other = batch.add(ABR_PATH_HOST_TO_DEVICE, mib, true, nullptr, &kOtherDevice);
  BatchEntry& b = batch.add(ABR_PATH_HOST_TO_DEVICE, mib, true, nullptr, &kDevice);
  BatchEntry& locked = batch.add(ABR_PATH_HOST_TO_DEVICE, mib, false, nullptr, &kDevice);  // page-locked: one DMA
  const abr::BatchPlan plan = abr::plan_batch(batch.pointers, kHost, kMiBChunks);
  CHECK(items(plan.streamed) == Pipelines{{0, 3}});
  // Cut as one transfer of their sum: the planner's shape, which the runtime carries out.
  const abr::StagingShape shape = abr::staging_shape(3 * mib / 2 + mib, kMiBChunks);
  CHECK(plan.streamed[0].shape.chunk == shape.chunk);
  CHECK(plan.streamed[0].shape.threads == shape.threads);
  CHECK(a.streamed);
  CHECK(b.streamed);
  CHECK_FALSE(other.streamed);  // another device, alone in its way: one copy of its own
  CHECK_FALSE(locked.streamed);
  CHECK(plan.coalesced == 1);

  Batch alone;  // one tensor, however large, is a transfer of its own
  alone.add(ABR_PATH_STAGED, 64 * mib, true, nullptr, &kDevice);
  CHECK(abr::plan_batch(alone.pointers, kHost, kMiBChunks).streamed.empty());

  Batch under;  // two tensors under two chunks together: one driver copy each
  under.add(ABR_PATH_HOST_TO_DEVICE, abr::kCoalesceMax + 1, true, nullptr, &kDevice);
  under.add(ABR_PATH_HOST_TO_DEVICE, abr::kCoalesceMax + 1, true, nullptr, &kDevice);
  CHECK(abr::plan_batch(under.pointers, kHost, kMiBChunks).streamed.empty());
  CHECK_FALSE(under.entries[0].streamed);
}

namespace {

// A pair's memory at made-up addresses: [src, src + bytes) read, [dst, dst + bytes) written.
abr::CopySpans spans(uintptr_t src, uintptr_t dst, uint64_t bytes) { return {{src, src + bytes}, {dst, dst + bytes}}; }

}  // namespace

TEST_CASE("plan_copy_batch: pairs stream only where no other pair reads or writes their memory") {
  const uint64_t mib = uint64_t{1} << 20;
  const uintptr_t host = uintptr_t{1} << 40, device = uintptr_t{1} << 44;
  // Four uploads of 1 MiB to one device, apart from each other: all four stream.
  const auto uploads = [&](abr::CopySpans extra, abr_path extra_path = ABR_PATH_DEVICE_TO_HOST) {
    Batch batch;
    std::vector<abr::CopySpans> memory;
    for (uintptr_t i = 0; i < 4; ++i) {
      batch.add(ABR_PATH_HOST_TO_DEVICE, mib, true, nullptr, &kDevice);
      memory.push_back(spans(host + 2 * i * mib, device + 2 * i * mib, mib));
    }
    // A fifth pair, small, moving in order (a read back from the device by default).
    const bool down = extra_path == ABR_PATH_DEVICE_TO_HOST;
    batch.add(extra_path, 4096, false, down ? &kDevice : nullptr, down ? nullptr : &kDevice);
    memory.push_back(extra);
    Pipelines chosen = items(abr::plan_copy_batch(batch.pointers, memory, kMiBChunks));
    return std::make_pair(chosen,
                          std::vector<bool>{batch.entries[0].streamed, batch.entries[1].streamed,
                                            batch.entries[2].streamed, batch.entries[3].streamed});
  };
  const uintptr_t elsewhere = uintptr_t{1} << 42;
  CHECK(uploads(spans(device + 9 * mib, elsewhere, 4096)).first == Pipelines{{0, 1, 2, 3}});

  // The fifth reads what the second writes (its last byte): its order matters, the other three stream.
  CHECK(uploads(spans(device + 3 * mib - 1, elsewhere, 4096)).first == Pipelines{{0, 2, 3}});
  // It writes what the third reads.
  CHECK(uploads(spans(elsewhere, host + 4 * mib + 100, 4096)).first == Pipelines{{0, 1, 3}});
  // It writes what the fourth writes.
  CHECK(uploads(spans(elsewhere, device + 7 * mib - 4096, 4096), ABR_PATH_HOST_TO_DEVICE).first ==
        Pipelines{{0, 1, 2}});
  // It reads what the first reads: two reads in either order read the same.
  CHECK(uploads(spans(host, elsewhere, 4096)).first == Pipelines{{0, 1, 2, 3}});
  // Touching is not overlapping: it reads the byte after the first's destination.
  CHECK(uploads(spans(device + mib, elsewhere, 4096)).first == Pipelines{{0, 1, 2, 3}});
  // Destinations [0, 100), [1, 2) and [50, 51) MiB: the third overlaps only the
  // first, whose end is the furthest, not the nearest before it. All three are
  // marked (checking each only against the one before would let the third stream);
  // two more apart stream.
  {
    Batch batch;
    const std::pair<uint64_t, uint64_t> at_size[] = {{0, 100}, {1, 1}, {50, 1}, {200, 1}, {300, 1}};
    std::vector<abr::CopySpans> memory;
    for (const auto& [at, size] : at_size) {
      batch.add(ABR_PATH_HOST_TO_DEVICE, size * mib, true, nullptr, &kDevice);
      memory.push_back(spans(host + at * mib, device + at * mib, size * mib));
    }
    CHECK(items(abr::plan_copy_batch(batch.pointers, memory, kMiBChunks)) == Pipelines{{3, 4}});
    CHECK_FALSE(batch.entries[2].streamed);
  }
  // Memory not known by address (no spans): nothing streams.
  {
    Batch batch;
    for (int i = 0; i < 4; ++i) batch.add(ABR_PATH_HOST_TO_DEVICE, mib, true, nullptr, &kDevice);
    CHECK(abr::plan_copy_batch(batch.pointers, {}, kMiBChunks).empty());
  }
}

// The order check against its definition, pair by pair, on random pairs crowded
// into a few MiB (so most overlap something): a pair streams exactly when no other
// pair reads or writes its destination, none writes its source, its own source and
// destination are apart, and at least one other pair streams with it.
TEST_CASE("plan_copy_batch: the pairs that stream are those its definition allows, on random pairs") {
  const uint64_t mib = uint64_t{1} << 20;
  const auto overlap = [](const abr::ByteSpan& a, const abr::ByteSpan& b) {
    return a.begin != a.end && b.begin != b.end && a.begin < b.end && b.begin < a.end;
  };
  std::mt19937 rng(20261127);
  std::size_t streamed_somewhere = 0, held_somewhere = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t n = 2 + rng() % 11;
    const uintptr_t room = (2 + rng() % 30) * mib;  // where every span lies: crowded or roomy
    Batch batch;
    std::vector<abr::CopySpans> memory;
    for (std::size_t i = 0; i < n; ++i) {
      batch.add(ABR_PATH_HOST_TO_DEVICE, mib, true, nullptr, &kDevice);
      const uint64_t bytes = rng() % 8 == 0 ? 0 : 1 + rng() % (mib / 2);  // an empty one now and then
      const uintptr_t src = uintptr_t{1} << 40 | rng() % room, dst = uintptr_t{1} << 40 | rng() % room;
      memory.push_back(spans(src, dst, bytes));
    }
    std::vector<std::size_t> expected;
    for (std::size_t i = 0; i < n; ++i) {
      bool alone = true;
      for (std::size_t j = 0; j < n && alone; ++j)
        alone = (j == i || !overlap(memory[i].dst, memory[j].dst)) && !overlap(memory[i].dst, memory[j].src) &&
            !overlap(memory[i].src, memory[j].dst);
      if (alone) expected.push_back(i);
    }
    if (expected.size() < 2) expected.clear();  // a pipeline of one is not streamed
    const Pipelines chosen = items(abr::plan_copy_batch(batch.pointers, memory, kMiBChunks));
    CAPTURE(trial);
    CHECK(chosen == (expected.empty() ? Pipelines{} : Pipelines{expected}));
    streamed_somewhere += expected.size();
    held_somewhere += n - expected.size();
  }
  CHECK(streamed_somewhere > 1000);  // both outcomes met many times
  CHECK(held_somewhere > 1000);
}

TEST_CASE("plan_copy_batch: one pipeline per device context and way") {
  const uint64_t mib = uint64_t{1} << 20;
  Batch batch;
  std::vector<abr::CopySpans> memory;
  const uintptr_t host = uintptr_t{1} << 40, device = uintptr_t{1} << 44;
  const abr_path paths[] = {ABR_PATH_HOST_TO_DEVICE, ABR_PATH_DEVICE_TO_HOST, ABR_PATH_HOST_TO_DEVICE,
                            ABR_PATH_DEVICE_TO_HOST, ABR_PATH_HOST_TO_DEVICE};
  for (uintptr_t i = 0; i < 5; ++i) {
    const bool up = paths[i] == ABR_PATH_HOST_TO_DEVICE;
    batch.add(paths[i], mib, true, up ? nullptr : &kDevice, up ? &kDevice : nullptr);
    memory.push_back(up ? spans(host + 2 * i * mib, device + 2 * i * mib, mib)
                        : spans(device + 2 * i * mib, host + 2 * i * mib, mib));
  }
  CHECK(items(abr::plan_copy_batch(batch.pointers, memory, kMiBChunks)) == Pipelines{{0, 2, 4}, {1, 3}});
  CHECK(batch.entries[3].pipeline == 1);

  // Two devices: a pipeline each, and one more pair to a third moves alone.
  Batch devices;
  std::vector<abr::CopySpans> apart;
  const char third = 0;
  const void* device_of[] = {&kDevice, &kOtherDevice, &kDevice, &kOtherDevice, &third};
  for (uintptr_t i = 0; i < 5; ++i) {
    devices.add(ABR_PATH_HOST_TO_DEVICE, mib, true, nullptr, device_of[i]);
    apart.push_back(spans(host + 2 * i * mib, device + 2 * i * mib, mib));
  }
  CHECK(items(abr::plan_copy_batch(devices.pointers, apart, kMiBChunks)) == Pipelines{{0, 2}, {1, 3}});
  CHECK_FALSE(devices.entries[4].streamed);
}
