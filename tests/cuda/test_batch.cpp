// abr_to_device_many on CUDA (the fake driver in CI, a GPU with make gpu-check):
// 64 small tensors from pageable memory move with one DMA through one pinned
// block into one device allocation; every result holds its own values; on a
// lagging stream the sources are held until the stream's work is done.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"

using namespace test;

namespace {

struct Batch {
  std::vector<std::vector<int32_t>> data;
  std::vector<std::unique_ptr<Managed>> sources;
  std::vector<DLManagedTensorVersioned*> pointers;
  std::vector<DLManagedTensorVersioned*> out;
  Batch(int tensors, std::size_t elements) : Batch(std::vector<std::size_t>(tensors, elements)) {}
  explicit Batch(const std::vector<std::size_t>& elements) {
    data.reserve(elements.size());  // the sources point into it
    for (std::size_t i = 0; i < elements.size(); ++i) {
      data.push_back(iota(elements[i], static_cast<int32_t>(i) * 100000));
      sources.push_back(
          std::make_unique<Managed>(data.back().data(), i32, std::vector<int64_t>{static_cast<int64_t>(elements[i])}));
      pointers.push_back(&sources.back()->managed);
    }
    out.assign(pointers.size(), nullptr);
  }
  ~Batch() {
    for (DLManagedTensorVersioned* t : out)
      if (t) t->deleter(t);
  }
  int deleted() const {
    int sum = 0;
    for (const auto& s : sources) sum += s->deleted;
    return sum;
  }
  abr_status to(abr_runtime* rt, DLDevice device, abr_stream* stream = nullptr, abr_batch_report* report = nullptr) {
    return abr_to_device_many(rt, pointers.data(), pointers.size(), device, nullptr, stream, out.data(), report);
  }
};

}  // namespace

TEST_CASE_FIXTURE(NoDriverFindings, "batch: 64 small pageable tensors to cuda:0 move with one DMA") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  Batch batch(64, 1024);  // 4 KiB each
  const long long copies_before = fake ? fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyHtoDAsync)) : 0;
  const long long queries_before = fake ? fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuPointerGetAttributes)) : 0;
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(batch.to(rt, cuda0, nullptr, &report) == ABR_OK, std::string(abr_last_error()));
  if (fake) CHECK(fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyHtoDAsync)) - copies_before == 1);
  // Packed into the batch's pinned block whatever their memory: no source is asked
  // whether it is page-locked (a driver call per tensor, a third of a small item's cost).
  if (fake) CHECK(fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuPointerGetAttributes)) - queries_before == 0);
  CHECK(report.coalesced == 64);
  CHECK(report.copies == 1);
  CHECK(batch.deleted() == 64);
  for (std::size_t i = 0; i < 64; ++i) {
    CAPTURE(i);
    const DLTensor& t = batch.out[i]->dl_tensor;
    CHECK((t.device.device_type == kDLCUDA && t.byte_offset == 0));
    CHECK(read_back(rt, t) == batch.data[i]);
    if (i) CHECK(static_cast<char*>(t.data) - static_cast<char*>(batch.out[i - 1]->dl_tensor.data) == 4096);
  }
}

TEST_CASE_FIXTURE(NoDriverFindings, "batch: 1000 small tensors to cuda:0 are packed on several threads, one DMA") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  REQUIRE(abr_runtime_set_staging(rt, 4, 0) == ABR_OK);
  Batch batch(1000, 1024);  // 4 KiB each: 3.9 MiB, three pieces of a memcpy
  const long long copies_before = fake ? fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyHtoDAsync)) : 0;
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(batch.to(rt, cuda0, nullptr, &report) == ABR_OK, std::string(abr_last_error()));
  if (fake) CHECK(fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyHtoDAsync)) - copies_before == 1);
  CHECK(report.coalesced == 1000);
  CHECK(std::string(report.detail).find("block on 3 threads and moved with one copy") != std::string::npos);
  CHECK(batch.deleted() == 1000);
  bool all_right = true;  // one CHECK for 1000 tensors
  for (std::size_t i = 0; i < 1000; ++i) all_right &= read_back(rt, batch.out[i]->dl_tensor) == batch.data[i];
  CHECK(all_right);
}

TEST_CASE_FIXTURE(NoDriverFindings, "batch: on a lagging stream the sources are held until its work is done") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  Batch batch(16, 2048);
  {
    Lag lag(20000);  // every DMA lags the host by 20 ms
    REQUIRE_MESSAGE(batch.to(rt, cuda0, stream) == ABR_OK, std::string(abr_last_error()));
    if (lag.fake) CHECK(batch.deleted() == 0);  // the DMA that reads them has not run yet
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  CHECK(batch.deleted() == 16);
  for (std::size_t i = 0; i < 16; ++i) CHECK(read_back(rt, batch.out[i]->dl_tensor) == batch.data[i]);
  abr_stream_destroy(stream);
}

// Each of 1000 x 4 KiB cuda_host results in a pool block of its own cost a pool's lock
// and lookup: 3.5x the same batch into the CPU's memory (fake driver, 2026-11-29).
TEST_CASE_FIXTURE(NoDriverFindings, "batch: to cuda_host, small results share one pooled block, a large one its own") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  std::vector<std::size_t> elements(7, 100);             // 400 bytes: 512-byte slots
  elements.push_back((64 << 10) / sizeof(int32_t) + 1);  // over 64 KiB (kCoalesceMax): a block of its own
  Batch batch(elements);
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = ABR_COPY_ALWAYS;
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  const abr_pool_stats at_start = pool_stats(rt);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(abr_to_device_many(rt, batch.pointers.data(), 8, cuda_host, &options, nullptr, batch.out.data(),
                                     &report) == ABR_OK,
                  abr_last_error());
  const abr_pool_stats during = pool_stats(rt);
  CHECK(during.hits + during.misses - at_start.hits - at_start.misses ==
        2);  // one block for the seven, one for the large
  CHECK(report.coalesced == 7);
  CHECK(std::string(report.detail) == "7 of 8 tensors packed into one 3584 byte block; 0 view(s), 1 other copy(ies)");
  const auto* block = static_cast<const char*>(batch.out[0]->dl_tensor.data);
  for (std::size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    const DLTensor& t = batch.out[i]->dl_tensor;
    CHECK(t.device.device_type == kDLCUDAHost);
    if (i < 7) CHECK(static_cast<const char*>(t.data) == block + i * 512);
    CHECK(std::vector<int32_t>(static_cast<int32_t*>(t.data), static_cast<int32_t*>(t.data) + elements[i]) ==
          batch.data[i]);
  }
  // The block lives until the last of its results goes (ASan would see a use after free).
  for (std::size_t i = 0; i < 6; ++i) {
    batch.out[i]->deleter(batch.out[i]);
    batch.out[i] = nullptr;
  }
  CHECK(std::vector<int32_t>(static_cast<int32_t*>(batch.out[6]->dl_tensor.data),
                             static_cast<int32_t*>(batch.out[6]->dl_tensor.data) + 100) == batch.data[6]);
  for (std::size_t i = 6; i < 8; ++i) {
    batch.out[i]->deleter(batch.out[i]);
    batch.out[i] = nullptr;
  }
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  CHECK(pool_stats(rt).bytes_in_use == at_start.bytes_in_use);  // both blocks back
}

TEST_CASE_FIXTURE(NoDriverFindings, "copy_many: 32 pageable copies into cuda:0 wait for the device once") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  Batch batch(32, 1024), zeros(32, 1024);
  for (auto& values : zeros.data) std::fill(values.begin(), values.end(), 0);
  REQUIRE(zeros.to(rt, cuda0) == ABR_OK);  // 32 device tensors to copy into
  std::vector<const DLTensor*> srcs, dsts;
  for (std::size_t i = 0; i < 32; ++i) {
    srcs.push_back(&batch.sources[i]->tensor());
    dsts.push_back(&zeros.out[i]->dl_tensor);
  }
  const char* const sync = "calls:" ABR_TEST_CUDA_SYMBOL(cuStreamSynchronize);
  const long long syncs_before = fake ? fake.stat(sync) : 0;
  REQUIRE_MESSAGE(abr_copy_many(rt, srcs.data(), dsts.data(), 32, nullptr, nullptr, nullptr) == ABR_OK,
                  abr_last_error());
  if (fake) CHECK(fake.stat(sync) - syncs_before == 1);
  for (std::size_t i = 0; i < 32; ++i) CHECK(read_back(rt, zeros.out[i]->dl_tensor) == batch.data[i]);
}

// Small reads into new pageable host buffers are gathered: each lands in pinned
// memory with the others and the host waits once, instead of one synchronous driver
// copy into pageable memory per tensor. Sources that follow each other in one
// allocation (a batch's results here; torch's small tensors carved from one
// segment) are read in one copy.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: 32 small cuda:0 tensors to the CPU wait for the device once") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  Batch batch(32, 1024);
  REQUIRE(batch.to(rt, cuda0) == ABR_OK);
  std::vector<DLManagedTensorVersioned*> on_device = batch.out, on_host(32, nullptr);
  const char* const sync = "calls:" ABR_TEST_CUDA_SYMBOL(cuStreamSynchronize);
  const char* const reads = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoHAsync);
  const char* const queries = "calls:" ABR_TEST_CUDA_SYMBOL(cuPointerGetAttributes);
  const long long syncs_before = fake ? fake.stat(sync) : 0, reads_before = fake ? fake.stat(reads) : 0;
  const long long queries_before = fake ? fake.stat(queries) : 0;
  const long long pageable_before = fake ? fake.stat("pageable_async_copies") : 0;
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(
      abr_to_device_many(rt, on_device.data(), 32, cpu, nullptr, nullptr, on_host.data(), &report) == ABR_OK,
      abr_last_error());
  std::fill(batch.out.begin(), batch.out.end(), nullptr);  // consumed by the second batch
  if (fake) {
    CHECK(fake.stat(reads) - reads_before == 1);      // 32 slots of 4 KiB side by side: one copy
    CHECK(fake.stat(queries) - queries_before == 1);  // and one allocation, checked once
    CHECK(fake.stat(sync) - syncs_before == 1);
    CHECK(fake.stat("pageable_async_copies") - pageable_before == 0);
  }
  CHECK(report.copies == 1);
  CHECK(std::string(report.detail).find("31 small read(s) joined") != std::string::npos);
  // The results are slots of one host block (one allocation, not 32), which the last
  // of them keeps: deleted in order, each still holds its values (ASan sees any early free).
  for (std::size_t i = 0; i < 32; ++i) {
    CAPTURE(i);
    const DLTensor& t = on_host[i]->dl_tensor;
    REQUIRE(t.device.device_type == kDLCPU);
    if (i) CHECK(static_cast<char*>(t.data) - static_cast<char*>(on_host[i - 1]->dl_tensor.data) == 4096);
  }
  for (std::size_t i = 0; i < 32; ++i) {
    CAPTURE(i);
    const DLTensor& t = on_host[i]->dl_tensor;
    CHECK(std::vector<int32_t>(static_cast<int32_t*>(t.data), static_cast<int32_t*>(t.data) + 1024) == batch.data[i]);
    on_host[i]->deleter(on_host[i]);
  }
}

// 1000 reads of 4 KiB land in pinned memory and are copied out to their results on the
// host threads a memcpy of 3.9 MiB is cut for, each a run of reads: every value where
// it belongs. The sources are the slots of four blocks (four batches of 250),
// interleaved, so no read joins its neighbour: each is a copy and a copy out of its own.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: 1000 small reads are copied out on several threads") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  REQUIRE(abr_runtime_set_staging(rt, 4, 0) == ABR_OK);
  std::vector<std::unique_ptr<Batch>> parts;
  for (int part = 0; part < 4; ++part) {  // 250 each, every value distinct across the parts
    Batch& batch = *parts.emplace_back(std::make_unique<Batch>(250, 1024));
    for (std::vector<int32_t>& values : batch.data)
      for (int32_t& value : values) value += part * 50000000;
    REQUIRE(batch.to(rt, cuda0) == ABR_OK);
  }
  // Interleaved, so that neighbours in the batch come from different allocations.
  std::vector<DLManagedTensorVersioned*> interleaved;
  std::vector<const std::vector<int32_t>*> expected;
  for (std::size_t i = 0; i < 250; ++i)
    for (const std::unique_ptr<Batch>& part : parts) {
      interleaved.push_back(part->out[i]);
      part->out[i] = nullptr;  // consumed by the batch below
      expected.push_back(&part->data[i]);
    }
  std::vector<DLManagedTensorVersioned*> on_host(1000, nullptr);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  {
    Lag lag(2000);  // a copy out before the reads' wait would find zeros
    REQUIRE_MESSAGE(
        abr_to_device_many(rt, interleaved.data(), 1000, cpu, nullptr, nullptr, on_host.data(), &report) == ABR_OK,
        abr_last_error());
  }
  CHECK(std::string(report.detail).find("small reads copied out of pinned memory on 3 threads") != std::string::npos);
  bool all_right = true;  // one CHECK for 1000 tensors
  for (std::size_t i = 0; i < 1000; ++i) {
    const DLTensor& t = on_host[i]->dl_tensor;
    all_right &= t.device.device_type == kDLCPU &&
        std::vector<int32_t>(static_cast<int32_t*>(t.data), static_cast<int32_t*>(t.data) + 1024) == *expected[i];
  }
  CHECK(all_right);
  for (DLManagedTensorVersioned* t : on_host) t->deleter(t);
}

// Out of memory at any allocation of a batch on a lagging stream: the call fails
// with nothing handed out, and before the sources go back to the caller, the reads
// already queued from them are waited for, so the caller may free them at once.
// Small reads from separate allocations, each its own copy, landing in pinned memory
// (the pool has no room for page-locked results): the list of what landed grows
// after the first read is queued.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: out of memory part way waits for the reads queued before it") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;  // the lag and the counts are the fake's
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  REQUIRE(abr_pool_set_limit(rt, 4 << 20) == ABR_OK);  // results may take half, which a cuda_host tensor holds
  Batch held(1, 512 << 10);
  REQUIRE(held.to(rt, cuda_host) == ABR_OK);
  const std::vector<int32_t> data = iota(1024, 1);
  const char* const reads = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoHAsync);
  int failures_after_a_read = 0;
  for (long after = 0; after < 100000; ++after) {
    CAPTURE(after);
    std::vector<Owned> sources;  // the caller's until a batch succeeds
    std::vector<DLManagedTensorVersioned*> srcs;
    for (int i = 0; i < 5; ++i) {
      Managed host(const_cast<int32_t*>(data.data()), i32, {1024});
      sources.emplace_back(move_to(rt, &host.managed, cuda0));
      srcs.push_back(sources.back().t);
    }
    std::vector<DLManagedTensorVersioned*> out(5, nullptr);
    Lag lag(20000);
    const long long reads_before = fake.stat(reads);
    abr_status status = ABR_OK;
    bool failed = false;
    {
      FailingNew failing(after);
      status = abr_to_device_many(rt, srcs.data(), 5, cpu, nullptr, stream, out.data(), nullptr);
      failed = failing.failed();
    }
    if (status == ABR_OK) {  // the batch took its sources (an allocation that failed may: its words)
      REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
      for (Owned& source : sources) source.t = nullptr;
      for (DLManagedTensorVersioned* result : out) {
        CHECK(std::vector<int32_t>(static_cast<int32_t*>(result->dl_tensor.data),
                                   static_cast<int32_t*>(result->dl_tensor.data) + 1024) == data);
        result->deleter(result);
      }
      if (!failed) break;  // every allocation walked
      continue;
    }
    REQUIRE_MESSAGE(status == ABR_ERR_OUT_OF_MEMORY, std::string(abr_last_error()));
    CHECK(std::all_of(out.begin(), out.end(), [](DLManagedTensorVersioned* t) { return t == nullptr; }));
    CHECK(fake.stat("dtoh_async_run") == fake.stat(reads));  // nothing queued still reads the sources
    if (fake.stat(reads) > reads_before) ++failures_after_a_read;
  }
  CHECK(failures_after_a_read > 0);  // the walk reached allocations after the first read
  REQUIRE(abr_pool_set_limit(rt, 0) == ABR_OK);
  abr_stream_destroy(stream);
}

// The same walk over other batch shapes: whichever allocation fails, the call fails
// with nothing handed out and no source deleted, or succeeds whole (an allocation
// for its words may fail), and nothing leaks (the ASan build runs this too).
TEST_CASE_FIXTURE(NoDriverFindings, "batch: out of memory at any allocation hands back nothing and keeps the sources") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  struct Shape {
    const char* name;
    std::vector<std::size_t> elements;
    DLDevice to;
    abr_stream* stream;
  };
  const std::vector<std::size_t> small(64, 1024), large{std::size_t{1} << 21, std::size_t{1} << 21, 3000};
  const Shape shapes[] = {{"64 x 4 KiB to cuda:0 on a stream", small, cuda0, stream},
                          {"64 x 4 KiB to cuda:0", small, cuda0, nullptr},
                          {"64 x 4 KiB into the CPU", small, cpu, nullptr},
                          {"two 8 MiB (one pipeline) and 12 KiB to cuda:0", large, cuda0, nullptr}};
  for (const Shape& shape : shapes) {
    const std::string name = shape.name;
    CAPTURE(name);
    for (long after = 0; after < 100000; ++after) {
      CAPTURE(after);
      Batch batch(shape.elements);
      abr_status status = ABR_OK;
      bool failed = false;
      {
        FailingNew failing(after);
        status = batch.to(rt, shape.to, shape.stream);
        failed = failing.failed();
      }
      if (shape.stream) REQUIRE(abr_stream_synchronize(shape.stream) == ABR_OK);
      if (status == ABR_OK) {
        bool all_right = true;
        for (std::size_t i = 0; i < shape.elements.size(); ++i)
          all_right &= read_back(rt, batch.out[i]->dl_tensor) == batch.data[i];
        CHECK(all_right);
        for (DLManagedTensorVersioned*& result : batch.out) {
          result->deleter(result);
          result = nullptr;
        }
        CHECK(batch.deleted() == static_cast<int>(shape.elements.size()));  // copied, or held by a view till now
        if (!failed) break;                                                 // every allocation walked
        continue;
      }
      REQUIRE_MESSAGE(status == ABR_ERR_OUT_OF_MEMORY, std::string(abr_last_error()));
      CHECK(batch.deleted() == 0);
      CHECK(std::all_of(batch.out.begin(), batch.out.end(), [](DLManagedTensorVersioned* t) { return t == nullptr; }));
    }
  }
  abr_stream_destroy(stream);
}

// A later pair whose source the host engine packs (a transposed view) reads page-locked
// memory an earlier pair's queued read is still filling: it waits for that read first.
TEST_CASE_FIXTURE(NoDriverFindings,
                  "copy_many: a pair packed on the host sees an earlier pair's read into its source") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  constexpr int64_t kSide = 64;
  const std::vector<int32_t> data = iota(kSide * kSide, 1);
  std::vector<int32_t> zeros(kSide * kSide, 0);
  Managed host(const_cast<int32_t*>(data.data()), i32, {kSide * kSide}), blank(zeros.data(), i32, {kSide * kSide}),
      blank2(zeros.data(), i32, {kSide * kSide});
  Owned on_device(move_to(rt, &host.managed, cuda0));
  Owned landing(move_to(rt, &blank.managed, cuda_host));  // page-locked: the read into it is queued
  Owned result(move_to(rt, &blank2.managed, cuda0));
  int64_t shape[2] = {kSide, kSide}, transposed[2] = {1, kSide};
  DLTensor as_matrix = *landing;
  as_matrix.ndim = 2;
  as_matrix.shape = shape;
  as_matrix.strides = transposed;  // packed by the host engine into pinned staging
  DLTensor result_matrix = *result;
  result_matrix.ndim = 2;
  result_matrix.shape = shape;
  result_matrix.strides = nullptr;
  const DLTensor* srcs[2] = {&*on_device, &as_matrix};
  const DLTensor* dsts[2] = {&*landing, &result_matrix};
  {
    Lag lag(20000);  // the read lags the host by 20 ms
    REQUIRE_MESSAGE(abr_copy_many(rt, srcs, dsts, 2, nullptr, nullptr, nullptr) == ABR_OK,
                    std::string(abr_last_error()));
  }
  const std::vector<int32_t> got = read_back(rt, *result);
  bool transposed_right = true;
  for (int64_t i = 0; i < kSide && transposed_right; ++i)
    for (int64_t j = 0; j < kSide; ++j)
      transposed_right = transposed_right && got[i * kSide + j] == data[j * kSide + i];
  CHECK(transposed_right);
}

// Reads join only what lies next to them, ascending, in one allocation: tensors of
// their own allocations, the same tensors in reverse order, and every other tensor
// (4 KiB gaps) each take a copy of their own, and every value lands where it belongs.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: small reads join only their neighbours in one allocation") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  const char* const reads = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoHAsync);
  const auto to_cpu = [&](std::vector<DLManagedTensorVersioned*> sources, long long expected_reads) {
    std::vector<DLManagedTensorVersioned*> on_host(sources.size(), nullptr);
    const long long reads_before = fake.stat(reads);
    REQUIRE_MESSAGE(abr_to_device_many(rt, sources.data(), sources.size(), cpu, nullptr, nullptr, on_host.data(),
                                       nullptr) == ABR_OK,
                    abr_last_error());
    CHECK(fake.stat(reads) - reads_before == expected_reads);
    return on_host;
  };
  const auto values_of = [](DLManagedTensorVersioned* t) {
    const auto* data = static_cast<const int32_t*>(t->dl_tensor.data);
    std::vector<int32_t> out(data, data + t->dl_tensor.shape[0]);
    t->deleter(t);
    return out;
  };

  Batch separate(8, 1024);  // one to_device each: allocations of their own
  std::vector<DLManagedTensorVersioned*> own(8);
  for (int i = 0; i < 8; ++i) own[i] = move_to(rt, separate.pointers[i], cuda0);
  std::vector<DLManagedTensorVersioned*> back = to_cpu(own, 8);
  for (int i = 0; i < 8; ++i) CHECK(values_of(back[i]) == separate.data[i]);

  Batch packed(8, 1024);  // one allocation, 4 KiB slots side by side
  REQUIRE(packed.to(rt, cuda0) == ABR_OK);
  std::vector<DLManagedTensorVersioned*> reversed(packed.out.rbegin(), packed.out.rend());
  std::fill(packed.out.begin(), packed.out.end(), nullptr);  // consumed below
  back = to_cpu(reversed, 8);
  for (int i = 0; i < 8; ++i) CHECK(values_of(back[i]) == packed.data[7 - i]);

  Batch gaps(8, 1024);
  REQUIRE(gaps.to(rt, cuda0) == ABR_OK);
  std::vector<DLManagedTensorVersioned*> even{gaps.out[0], gaps.out[2], gaps.out[4], gaps.out[6]},
      odd{gaps.out[1], gaps.out[3], gaps.out[5], gaps.out[7]};
  std::fill(gaps.out.begin(), gaps.out.end(), nullptr);
  back = to_cpu(even, 4);
  for (int i = 0; i < 4; ++i) CHECK(values_of(back[i]) == gaps.data[2 * i]);
  back = to_cpu(odd, 4);
  for (int i = 0; i < 4; ++i) CHECK(values_of(back[i]) == gaps.data[2 * i + 1]);
}

// On a stream, small reads from one device land straight in the results, one block of
// page-locked memory placed as the sources lie (the planner's joins), queued with no
// landing block, copy out or host wait: before, the batch synchronized the stream and
// copied every result out of a landing block, so a non-blocking batch blocked.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: small reads on a stream land in page-locked results, with no wait") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  Batch packed(64, 1000);  // 4000 bytes in 4096-byte slots of one allocation: 96-byte gaps
  REQUIRE(packed.to(rt, cuda0) == ABR_OK);
  Batch large(1, 100000), alone(1, 1000), shifted(1, 1000);  // a 400 KB read between, other allocations
  REQUIRE(large.to(rt, cuda0) == ABR_OK);
  REQUIRE(alone.to(rt, cuda0) == ABR_OK);
  REQUIRE(shifted.to(rt, cuda0) == ABR_OK);
  Managed past_first(shifted.out[0]->dl_tensor.data, i32, {999}, {}, 4, cuda0);  // 4 bytes past a 256-byte boundary
  std::vector<DLManagedTensorVersioned*> sources(packed.out.begin(), packed.out.begin() + 32);
  sources.push_back(large.out[0]);
  sources.insert(sources.end(), packed.out.begin() + 32, packed.out.end());
  sources.push_back(alone.out[0]);
  sources.push_back(&past_first.managed);
  std::vector<std::vector<int32_t>> expected(packed.data.begin(), packed.data.begin() + 32);
  expected.push_back(large.data[0]);
  expected.insert(expected.end(), packed.data.begin() + 32, packed.data.end());
  expected.push_back(alone.data[0]);
  expected.emplace_back(shifted.data[0].begin() + 1, shifted.data[0].end());
  std::fill(packed.out.begin(), packed.out.end(), nullptr);  // consumed below
  large.out[0] = alone.out[0] = nullptr;

  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  abr_pool_stats at_start = ABR_POOL_STATS_INIT, during = ABR_POOL_STATS_INIT, at_end = ABR_POOL_STATS_INIT;
  REQUIRE(abr_pool_get_stats(rt, &at_start) == ABR_OK);
  const char* const reads = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoHAsync);
  const char* const waits = "calls:" ABR_TEST_CUDA_SYMBOL(cuStreamSynchronize);
  const long long reads_before = fake ? fake.stat(reads) : 0, waits_before = fake ? fake.stat(waits) : 0;
  std::vector<DLManagedTensorVersioned*> on_host(sources.size(), nullptr);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  {
    Lag lag(5000);
    REQUIRE_MESSAGE(
        abr_to_device_many(rt, sources.data(), sources.size(), cpu, nullptr, stream, on_host.data(), &report) == ABR_OK,
        abr_last_error());
    if (fake) CHECK(fake.stat(waits) == waits_before);  // queued, not waited for
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  INFO(report.detail);
  CHECK(std::string(report.detail).find("small reads straight into page-locked results") != std::string::npos);
  if (fake) CHECK(fake.stat(reads) - reads_before == 5);  // two runs of 32, the large one, two alone
  CHECK(std::string(report.detail).find("62 small read(s) joined") != std::string::npos);
  REQUIRE(abr_pool_get_stats(rt, &during) == ABR_OK);
  CHECK(during.bytes_in_use - at_start.bytes_in_use >= 66 * 4000 + 400000);  // the results hold pool memory
  // 256 bytes aligned, as abr_to_device's result, though its source is 4 bytes past a boundary
  CHECK(reinterpret_cast<uintptr_t>(on_host.back()->dl_tensor.data) % 256 == 0);
  for (std::size_t i = 0; i < on_host.size(); ++i) {
    CAPTURE(i);
    const DLTensor& t = on_host[i]->dl_tensor;
    CHECK(t.device.device_type == kDLCPU);
    const auto* values = static_cast<const int32_t*>(t.data);
    CHECK(std::vector<int32_t>(values, values + t.shape[0]) == expected[i]);
  }
  for (std::size_t i = 1; i < 32; ++i)  // placed as their sources lie: 4096 bytes apart
    CHECK(static_cast<const char*>(on_host[i]->dl_tensor.data) -
              static_cast<const char*>(on_host[i - 1]->dl_tensor.data) ==
          4096);
  for (DLManagedTensorVersioned* t : on_host) t->deleter(t);
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);  // after the deleted results' memory is back
  REQUIRE(abr_pool_get_stats(rt, &at_end) == ABR_OK);
  CHECK(at_end.bytes_in_use == at_start.bytes_in_use);
  abr_stream_destroy(stream);
}

// Where the pool has no room for them, the results are plain memory, filled from a
// landing block after one wait, as without a stream.
TEST_CASE_FIXTURE(NoDriverFindings,
                  "batch: small reads on a stream past the pool's room for results land in plain memory") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  Batch packed(64, 1024);
  REQUIRE(packed.to(rt, cuda0) == ABR_OK);
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  REQUIRE(abr_pool_set_limit(rt, 4 << 20) == ABR_OK);  // results may take half, which a cuda_host tensor holds
  Batch held(1, 512 << 10);
  REQUIRE(held.to(rt, cuda_host) == ABR_OK);
  std::vector<DLManagedTensorVersioned*> on_host(64, nullptr);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  {
    Lag lag(5000);
    REQUIRE_MESSAGE(
        abr_to_device_many(rt, packed.out.data(), 64, cpu, nullptr, stream, on_host.data(), &report) == ABR_OK,
        abr_last_error());
  }
  std::fill(packed.out.begin(), packed.out.end(), nullptr);
  INFO(report.detail);
  CHECK(std::string(report.detail).find("page-locked") == std::string::npos);
  CHECK(std::string(report.detail).find("63 small read(s) joined") != std::string::npos);
  for (std::size_t i = 0; i < 64; ++i) {
    CAPTURE(i);
    const auto* values = static_cast<const int32_t*>(on_host[i]->dl_tensor.data);
    CHECK(std::vector<int32_t>(values, values + 1024) == packed.data[i]);  // copied out after the wait
    on_host[i]->deleter(on_host[i]);
  }
  REQUIRE(abr_pool_set_limit(rt, 0) == ABR_OK);
  abr_stream_destroy(stream);
}

// An allocation checked for one source vouches only for views inside it: a later
// source that starts there but runs past its end is asked about, and refused.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: a source running past an allocation checked before is refused") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  Batch batch(2, 1024);
  REQUIRE(batch.to(rt, cuda0) == ABR_OK);  // one block of two 4 KiB slots
  DLManagedTensorVersioned* first = batch.out[0];
  // The second slot, viewed as 64 MiB: past the end of any block the cache made for 8 KiB.
  Managed too_long(batch.out[1]->dl_tensor.data, i32, {int64_t{16} << 20}, {}, 0, cuda0);
  std::vector<DLManagedTensorVersioned*> sources{first, &too_long.managed}, out(2, nullptr);
  CHECK(abr_to_device_many(rt, sources.data(), 2, cpu, nullptr, nullptr, out.data(), nullptr) == ABR_ERR_DLPACK_DATA);
  CHECK(std::string(abr_last_error()).find("srcs[1]") != std::string::npos);
  CHECK(std::string(abr_last_error()).find("allocation") != std::string::npos);
  CHECK(out[0] == nullptr);
  CHECK(too_long.deleted == 0);
}

// On a stream, results over 64 KiB from cuda:0 to the CPU are page-locked memory
// from the pool, each filled by a queued DMA (smaller ones are gathered as above).
TEST_CASE_FIXTURE(NoDriverFindings, "batch: large cuda:0 tensors to the CPU on a stream land in page-locked memory") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  Batch batch(3, 64 * 1024);  // 256 KiB each
  REQUIRE(batch.to(rt, cuda0) == ABR_OK);
  std::vector<DLManagedTensorVersioned*> on_device = batch.out, on_host(3, nullptr);
  std::fill(batch.out.begin(), batch.out.end(), nullptr);  // consumed below
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  const uint64_t lent = pool_stats(rt).bytes_in_use;
  const long long pageable = fake ? fake.stat("pageable_async_copies") : 0;
  REQUIRE_MESSAGE(abr_to_device_many(rt, on_device.data(), 3, cpu, nullptr, stream, on_host.data(), nullptr) == ABR_OK,
                  abr_last_error());
  CHECK(pool_stats(rt).bytes_in_use >= lent + 3 * 256 * 1024);
  if (fake) CHECK(fake.stat("pageable_async_copies") == pageable);
  REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const auto* values = static_cast<const int32_t*>(on_host[i]->dl_tensor.data);
    CHECK(on_host[i]->dl_tensor.device.device_type == kDLCPU);
    CHECK(std::vector<int32_t>(values, values + 64 * 1024) == batch.data[i]);
    on_host[i]->deleter(on_host[i]);
  }
  abr_stream_destroy(stream);
}

// A page-locked result the pool refuses (the driver has no more here) is planned
// again for plain host memory without the pool's blocks, and so are the batch's
// later ones: each one driver copy, read on the caller's lagging stream, none
// streamed. Before, the first was one DMA "into page-locked memory" that was not,
// and the second took page-locked memory from the pool that had just refused.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: refused page-locked results to the CPU are planned again") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  Batch batch(2, std::size_t{4} << 20);  // 16 MiB each: streamed together, were they planned with the pool
  REQUIRE(batch.to(rt, cuda0) == ABR_OK);
  std::vector<DLManagedTensorVersioned*> on_device = batch.out, on_host(2, nullptr);
  std::fill(batch.out.begin(), batch.out.end(), nullptr);  // consumed below
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);           // nothing cached: a trim cannot make room
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  {
    Lag lag(2000);                  // the stream's reads lag: each chunk is copied out only after its event
    fake.control("fail_alloc", 1);  // the first result's cuMemHostAlloc
    REQUIRE_MESSAGE(
        abr_to_device_many(rt, on_device.data(), 2, cpu, nullptr, stream, on_host.data(), &report) == ABR_OK,
        abr_last_error());
    fake.control("fail_alloc", 0);
  }
  INFO(report.detail);
  CHECK(report.copies == 2);
  CHECK(std::string(report.detail).find("streamed") == std::string::npos);
  CHECK(pool_stats(rt).bytes_pinned == 0);  // neither a page-locked result nor a staging block
  REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  for (std::size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    const auto* values = static_cast<const int32_t*>(on_host[i]->dl_tensor.data);
    CHECK(std::vector<int32_t>(values, values + (std::size_t{4} << 20)) == batch.data[i]);
    on_host[i]->deleter(on_host[i]);
  }
  abr_stream_destroy(stream);
}

// Pageable tensors too large to coalesce, to or from one device, stream through one
// pipeline as one transfer: each chunk packed by the host threads into a pinned block
// whichever tensors it crosses, then one queued DMA per tensor piece. Alone, each
// under two chunks was one driver copy from pageable memory (synchronous on a real
// driver, 13 GB/s on an H100), each larger one a pipeline of its own.
namespace {

// The DMAs of tensors of `bytes` laid end to end in chunks of `chunk`: one per piece
// of a tensor inside one chunk.
long long pieces(const std::vector<std::size_t>& bytes, std::size_t chunk) {
  std::vector<std::size_t> cuts;
  std::size_t end = 0;
  for (std::size_t b : bytes) cuts.push_back(end += b);
  for (std::size_t at = chunk; at < end; at += chunk) cuts.push_back(at);
  std::sort(cuts.begin(), cuts.end());
  return std::unique(cuts.begin(), cuts.end()) - cuts.begin();
}

}  // namespace

TEST_CASE_FIXTURE(NoDriverFindings, "batch: pageable tensors to cuda:0 and back stream through one pipeline") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  StagingChunkMib chunks("1");
  // Odd sizes, so chunks end inside tensors; one of 4 KiB coalesced as before, one just over 64 KiB streamed.
  const std::vector<std::size_t> elements{300000, 65537, 1000, 700001, 16385, 262144};
  Batch batch(elements);
  std::vector<std::size_t> streamed_bytes;
  for (std::size_t e : elements)
    if (e != 1000) streamed_bytes.push_back(e * 4);
  const char* const writes = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyHtoDAsync);
  const char* const reads = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoHAsync);
  const long long writes_before = fake ? fake.stat(writes) : 0;
  const long long pageable_before = fake ? fake.stat("pageable_async_copies") : 0;
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(batch.to(rt, cuda0, nullptr, &report) == ABR_OK, std::string(abr_last_error()));
  CHECK(std::string(report.detail).find("5 streamed through one pipeline") != std::string::npos);
  CHECK(report.coalesced == 1);
  CHECK(report.copies == 6);  // each streamed tensor still counts as a copy
  CHECK(batch.deleted() == 6);
  if (fake) {
    CHECK(fake.stat("pageable_async_copies") - pageable_before == 0);  // every DMA from a pinned block
    CHECK(fake.stat(writes) - writes_before == 1 + pieces(streamed_bytes, std::size_t{1} << 20));
  }
  for (std::size_t i = 0; i < elements.size(); ++i) {
    CAPTURE(i);
    CHECK(read_back(rt, batch.out[i]->dl_tensor) == batch.data[i]);
  }

  // Back to the CPU: the same five read into pinned blocks, the host copying each chunk out.
  std::vector<DLManagedTensorVersioned*> on_device = batch.out, on_host(elements.size(), nullptr);
  std::fill(batch.out.begin(), batch.out.end(), nullptr);  // consumed below
  const long long reads_before = fake ? fake.stat(reads) : 0;
  const long long pageable_back = fake ? fake.stat("pageable_async_copies") : 0;
  report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(abr_to_device_many(rt, on_device.data(), on_device.size(), cpu, nullptr, nullptr, on_host.data(),
                                     &report) == ABR_OK,
                  abr_last_error());
  CHECK(std::string(report.detail).find("5 streamed through one pipeline") != std::string::npos);
  if (fake) {
    CHECK(fake.stat("pageable_async_copies") - pageable_back == 0);
    CHECK(fake.stat(reads) - reads_before == 1 + pieces(streamed_bytes, std::size_t{1} << 20));  // + the small read
  }
  for (std::size_t i = 0; i < elements.size(); ++i) {
    CAPTURE(i);
    const DLTensor& t = on_host[i]->dl_tensor;
    REQUIRE(t.device.device_type == kDLCPU);
    CHECK(std::vector<int32_t>(static_cast<int32_t*>(t.data), static_cast<int32_t*>(t.data) + elements[i]) ==
          batch.data[i]);
    on_host[i]->deleter(on_host[i]);
  }
}

// A block goes back to the pipeline only after every piece of its chunk has left it:
// with DMAs lagging the host, refilling it after the first piece alone would change
// the bytes the later pieces carry. Chunks of 4 MiB are packed by several threads,
// each a part that may cross from one tensor into the next.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: streamed on a lagging stream, each value lands once every DMA has run") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  StagingChunkMib chunks("4");  // chunks the host threads cut in parts (from 2 MiB), across tensors
  Batch batch(std::vector<std::size_t>{1000000, 2000000, 1500001, 3000000, 900000, 2500000});  // 43 MB: 11 chunks
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  {
    Lag lag(5000);
    REQUIRE_MESSAGE(batch.to(rt, cuda0, stream, &report) == ABR_OK, std::string(abr_last_error()));
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  CHECK(std::string(report.detail).find("6 streamed through one pipeline") != std::string::npos);
  CHECK(batch.deleted() == 6);
  for (std::size_t i = 0; i < batch.data.size(); ++i) {
    CAPTURE(i);
    CHECK(read_back(rt, batch.out[i]->dl_tensor) == batch.data[i]);
  }
  abr_stream_destroy(stream);
}

// abr_copy_many streams the same pairs into existing tensors: pageable bytes one
// way between host memory and one device context, from two chunks and two pairs.
// Alone, each under two chunks was one driver copy from pageable memory, each larger
// one a pipeline of its own.
TEST_CASE_FIXTURE(NoDriverFindings,
                  "copy_many: pageable pairs into cuda:0 tensors and back stream through one pipeline") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  StagingChunkMib chunks("1");
  const std::vector<std::size_t> elements{300000, 65537, 1000, 700001, 16385, 262144};
  Batch batch(elements), on_device(elements);
  for (auto& values : on_device.data) std::fill(values.begin(), values.end(), 0);
  REQUIRE(on_device.to(rt, cuda0) == ABR_OK);
  std::vector<std::size_t> streamed_bytes;
  std::vector<const DLTensor*> srcs, dsts;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (elements[i] != 1000) streamed_bytes.push_back(elements[i] * 4);
    srcs.push_back(&batch.sources[i]->tensor());
    dsts.push_back(&on_device.out[i]->dl_tensor);
  }
  const char* const writes = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyHtoDAsync);
  const char* const reads = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoHAsync);
  const long long writes_before = fake ? fake.stat(writes) : 0;
  const long long pageable_before = fake ? fake.stat("pageable_async_copies") : 0;
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  {
    Lag lag(5000);  // on a lagging stream: each block refilled only after its DMAs have run
    REQUIRE_MESSAGE(abr_copy_many(rt, srcs.data(), dsts.data(), srcs.size(), nullptr, stream, &report) == ABR_OK,
                    abr_last_error());
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  INFO(report.detail);
  CHECK(std::string(report.detail).find("5 streamed through one pipeline") != std::string::npos);
  CHECK(report.copies == 6);
  if (fake) {
    CHECK(fake.stat("pageable_async_copies") - pageable_before == 1);  // the small pair's own driver copy
    CHECK(fake.stat(writes) - writes_before == 1 + pieces(streamed_bytes, std::size_t{1} << 20));
  }
  for (std::size_t i = 0; i < elements.size(); ++i) {
    CAPTURE(i);
    CHECK(read_back(rt, *dsts[i]) == batch.data[i]);
  }

  // Back into pageable host memory: read into pinned blocks, the host copying each chunk out.
  std::vector<std::vector<int32_t>> back;
  std::vector<std::unique_ptr<Managed>> back_tensors;
  std::vector<const DLTensor*> back_dsts;
  for (std::size_t e : elements) {
    back.emplace_back(e, -1);
    back_tensors.push_back(std::make_unique<Managed>(back.back().data(), i32, std::vector<int64_t>{int64_t(e)}));
    back_dsts.push_back(&back_tensors.back()->tensor());
  }
  const long long reads_before = fake ? fake.stat(reads) : 0;
  report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(abr_copy_many(rt, dsts.data(), back_dsts.data(), dsts.size(), nullptr, nullptr, &report) == ABR_OK,
                  abr_last_error());
  CHECK(std::string(report.detail).find("5 streamed through one pipeline") != std::string::npos);
  if (fake) CHECK(fake.stat(reads) - reads_before == 1 + pieces(streamed_bytes, std::size_t{1} << 20));
  for (std::size_t i = 0; i < elements.size(); ++i) {
    CAPTURE(i);
    CHECK(back[i] == batch.data[i]);
  }
  abr_stream_destroy(stream);
}

// Pageable copies to or from several devices stream in one pipeline per device (a
// model spread over two GPUs: its state dict loaded into its parameters, then saved).
TEST_CASE_FIXTURE(NoDriverFindings, "copy_many and a batch to the CPU: one pipeline per device") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) < 2) return;
  StagingChunkMib chunks("1");
  constexpr std::size_t kElements = 300001;  // 1.2 MB: two of them make two chunks
  Batch state(4, kElements), params(4, kElements);
  for (auto& values : params.data) std::fill(values.begin(), values.end(), 0);
  std::vector<const DLTensor*> srcs, dsts;
  for (std::size_t i = 0; i < 4; ++i) {  // cuda:0, cuda:1, cuda:0, cuda:1
    REQUIRE(abr_to_device_many(rt, &params.pointers[i], 1, i % 2 ? cuda1 : cuda0, nullptr, nullptr, &params.out[i],
                               nullptr) == ABR_OK);
    srcs.push_back(&state.sources[i]->tensor());
    dsts.push_back(&params.out[i]->dl_tensor);
  }
  const long long pageable_before = fake ? fake.stat("pageable_async_copies") : 0;
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(abr_copy_many(rt, srcs.data(), dsts.data(), 4, nullptr, nullptr, &report) == ABR_OK,
                  abr_last_error());
  CHECK(std::string(report.detail).find("4 streamed through 2 pipelines") != std::string::npos);
  if (fake) CHECK(fake.stat("pageable_async_copies") == pageable_before);  // every DMA from a pinned block
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(dsts[i]->device.device_id == static_cast<int32_t>(i % 2));
    CHECK(read_back(rt, *dsts[i]) == state.data[i]);
  }

  std::vector<DLManagedTensorVersioned*> on_host(4, nullptr);
  const long long pageable_back = fake ? fake.stat("pageable_async_copies") : 0;
  report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(
      abr_to_device_many(rt, params.out.data(), 4, cpu, nullptr, nullptr, on_host.data(), &report) == ABR_OK,
      abr_last_error());
  std::fill(params.out.begin(), params.out.end(), nullptr);  // consumed
  CHECK(std::string(report.detail).find("4 streamed through 2 pipelines") != std::string::npos);
  if (fake) CHECK(fake.stat("pageable_async_copies") == pageable_back);  // every DMA into a pinned block
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    const auto* values = static_cast<const int32_t*>(on_host[i]->dl_tensor.data);
    CHECK(std::vector<int32_t>(values, values + kElements) == state.data[i]);
    on_host[i]->deleter(on_host[i]);
  }
}

// A pipeline needs the pinned pool's blocks, which the pairs alone (each under two
// chunks: one driver copy) did not: where the pool refuses them, the pairs move one
// by one instead of failing, in copy_many and in a batch.
TEST_CASE_FIXTURE(NoDriverFindings, "copy_many and a batch: a pipeline the pinned pool refuses moves one by one") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  StagingChunkMib chunks("1");
  constexpr std::size_t kElements = 150001;  // 600 KB: four of them make two chunks
  Batch state(4, kElements), params(4, kElements);
  for (auto& values : params.data) std::fill(values.begin(), values.end(), 0);
  REQUIRE(params.to(rt, cuda0) == ABR_OK);
  std::vector<const DLTensor*> srcs, dsts;
  for (std::size_t i = 0; i < 4; ++i) {
    srcs.push_back(&state.sources[i]->tensor());
    dsts.push_back(&params.out[i]->dl_tensor);
  }
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  REQUIRE(abr_pool_set_limit(rt, 512 << 10) == ABR_OK);  // under one 1 MiB chunk
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(abr_copy_many(rt, srcs.data(), dsts.data(), 4, nullptr, nullptr, &report) == ABR_OK,
                  abr_last_error());
  CHECK(std::string(report.detail).find("4 moved one by one, the pinned pool refusing") != std::string::npos);
  CHECK(std::string(report.detail).find("streamed") == std::string::npos);
  for (std::size_t i = 0; i < 4; ++i) CHECK(read_back(rt, *dsts[i]) == state.data[i]);

  Batch again(4, kElements);
  report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(again.to(rt, cuda0, nullptr, &report) == ABR_OK, std::string(abr_last_error()));
  CHECK(std::string(report.detail).find("4 moved one by one") != std::string::npos);
  for (std::size_t i = 0; i < 4; ++i) CHECK(read_back(rt, again.out[i]->dl_tensor) == again.data[i]);
  REQUIRE(abr_pool_set_limit(rt, 0) == ABR_OK);
}

// A pipeline's pinned blocks go back to the pool while the stream still reads them.
// The next pipeline on that stream (the other way), at a limit one pipeline fits in,
// was refused and moved its pairs one by one; the pool now waits for those blocks.
TEST_CASE_FIXTURE(NoDriverFindings,
                  "copy_many: a second pipeline on one stream at the pool's limit reuses the first one's blocks") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  StagingChunkMib chunks("1");
  constexpr std::size_t kElements = 300001;  // 1.2 MB: two of them make two chunks
  Batch up(2, kElements), params(4, kElements);
  REQUIRE(params.to(rt, cuda0) == ABR_OK);
  std::vector<std::vector<int32_t>> back(2, std::vector<int32_t>(kElements, -1));
  std::vector<std::unique_ptr<Managed>> back_tensors;
  std::vector<const DLTensor*> srcs, dsts;
  for (std::size_t i = 0; i < 2; ++i) {  // up into params 0 and 1
    srcs.push_back(&up.sources[i]->tensor());
    dsts.push_back(&params.out[i]->dl_tensor);
  }
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(abr_copy_many(rt, srcs.data(), dsts.data(), 2, nullptr, nullptr, &report) == ABR_OK,
                  abr_last_error());
  REQUIRE(std::string(report.detail).find("2 streamed through one pipeline") != std::string::npos);
  abr_pool_stats one_pipeline = ABR_POOL_STATS_INIT;
  REQUIRE(abr_pool_get_stats(rt, &one_pipeline) == ABR_OK);
  REQUIRE(abr_pool_set_limit(rt, one_pipeline.bytes_pinned) == ABR_OK);  // what one pipeline took, now cached

  for (std::size_t i = 0; i < 2; ++i) {  // and params 2 and 3 down, in the same call
    back_tensors.push_back(std::make_unique<Managed>(back[i].data(), i32, std::vector<int64_t>{int64_t(kElements)}));
    srcs.push_back(&params.out[2 + i]->dl_tensor);
    dsts.push_back(&back_tensors.back()->tensor());
  }
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  report = ABR_BATCH_REPORT_INIT;
  {
    Lag lag(5000);  // the first pipeline's blocks still read by the stream when the second asks
    REQUIRE_MESSAGE(abr_copy_many(rt, srcs.data(), dsts.data(), 4, nullptr, stream, &report) == ABR_OK,
                    abr_last_error());
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  INFO(report.detail);
  CHECK(std::string(report.detail).find("4 streamed through 2 pipelines") != std::string::npos);
  abr_pool_stats after = ABR_POOL_STATS_INIT;
  REQUIRE(abr_pool_get_stats(rt, &after) == ABR_OK);
  CHECK(after.bytes_pinned <= one_pipeline.bytes_pinned);
  for (std::size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(read_back(rt, params.out[i]->dl_tensor) == up.data[i]);
    CHECK(back[i] == params.data[2 + i]);
  }
  abr_stream_destroy(stream);
  REQUIRE(abr_pool_set_limit(rt, 0) == ABR_OK);
}

// Streamed pairs move before the rest, so a pair whose memory another pair reads or
// writes keeps the caller's order. Here the first pair (one DMA into page-locked
// memory, never streamed) reads a device tensor the second then overwrites: streamed
// with the third and fourth, the second would have written it before the first read it.
TEST_CASE_FIXTURE(NoDriverFindings, "copy_many: a pair whose memory another pair touches keeps its order") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  StagingChunkMib chunks("1");
  constexpr std::size_t kElements = 400000;  // 1.6 MB: two of them make two chunks
  Batch first(3, kElements), second(3, kElements);
  for (auto& values : second.data)
    for (int32_t& v : values) v = -v - 1;  // other values than `first`'s
  REQUIRE(first.to(rt, cuda0) == ABR_OK);  // three device tensors holding `first`
  std::vector<int32_t> blank(kElements, -1);
  Managed blank_tensor(blank.data(), i32, {static_cast<int64_t>(kElements)});
  Owned saved(move_to(rt, &blank_tensor.managed, cuda_host));  // page-locked: the first pair is one DMA, in order
  const DLTensor* device[3] = {&first.out[0]->dl_tensor, &first.out[1]->dl_tensor, &first.out[2]->dl_tensor};
  // 0: device[0] -> saved; 1: second[0] -> device[0]; 2, 3: second[1], second[2] -> device[1], device[2].
  const DLTensor* srcs[4] = {device[0], &second.sources[0]->tensor(), &second.sources[1]->tensor(),
                             &second.sources[2]->tensor()};
  const DLTensor* dsts[4] = {&*saved, device[0], device[1], device[2]};
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(abr_copy_many(rt, srcs, dsts, 4, nullptr, nullptr, &report) == ABR_OK, std::string(abr_last_error()));
  INFO(report.detail);
  CHECK(std::string(report.detail).find("2 streamed through one pipeline") != std::string::npos);
  const auto* saved_values = static_cast<const int32_t*>(saved->data);
  CHECK(std::vector<int32_t>(saved_values, saved_values + kElements) == first.data[0]);  // read before the write
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(read_back(rt, *device[i]) == second.data[i]);
  }
}

// One tensor, or tensors that make less than two chunks, keep their own path: a
// pipeline of one chunk overlaps nothing.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: one large tensor, or less than two chunks, is not streamed") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  StagingChunkMib chunks("1");
  for (const std::vector<std::size_t>& elements :
       {std::vector<std::size_t>{1000, 700000}, std::vector<std::size_t>{100000, 150000}}) {
    Batch batch(elements);
    abr_batch_report report = ABR_BATCH_REPORT_INIT;
    REQUIRE_MESSAGE(batch.to(rt, cuda0, nullptr, &report) == ABR_OK, std::string(abr_last_error()));
    CHECK(std::string(report.detail).find("streamed") == std::string::npos);
    for (std::size_t i = 0; i < elements.size(); ++i) CHECK(read_back(rt, batch.out[i]->dl_tensor) == batch.data[i]);
  }
}

// Only bytes as they lie, from pageable memory, are streamed: a cast (packed and
// converted by the host engine), a transposed view and page-locked sources (one
// DMA each already) keep their own paths, with exact values.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: cast, strided and page-locked sources are not streamed") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  StagingChunkMib chunks("1");
  constexpr int64_t kSide = 512;  // 1 MiB of int32 per tensor, three tensors: three chunks together
  std::vector<std::vector<int32_t>> data;
  for (int i = 0; i < 3; ++i) data.push_back(iota(kSide * kSide, i * 7));
  const auto streamed = [](const abr_batch_report& report) {
    return std::string(report.detail).find("streamed") != std::string::npos;
  };

  {  // cast to f64: the host engine converts each into pinned staging
    std::vector<std::unique_ptr<Managed>> sources;
    std::vector<DLManagedTensorVersioned*> pointers, out(3, nullptr);
    for (auto& values : data) {
      sources.push_back(std::make_unique<Managed>(values.data(), i32, std::vector<int64_t>{kSide * kSide}));
      pointers.push_back(&sources.back()->managed);
    }
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    options.dtype = f64;
    abr_batch_report report = ABR_BATCH_REPORT_INIT;
    REQUIRE_MESSAGE(abr_to_device_many(rt, pointers.data(), 3, cuda0, &options, nullptr, out.data(), &report) == ABR_OK,
                    abr_last_error());
    CHECK_FALSE(streamed(report));
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      REQUIRE(out[i]->dl_tensor.dtype.bits == 64);
      Owned back(move_to(rt, out[i], cpu));
      const auto* values = static_cast<const double*>(back->data);
      bool same = true;
      for (std::size_t k = 0; k < data[i].size() && same; ++k) same = values[k] == static_cast<double>(data[i][k]);
      CHECK(same);
    }
  }
  {  // transposed views: packed by the host engine
    std::vector<std::unique_ptr<Managed>> sources;
    std::vector<DLManagedTensorVersioned*> pointers, out(3, nullptr);
    for (auto& values : data) {
      sources.push_back(std::make_unique<Managed>(values.data(), i32, std::vector<int64_t>{kSide, kSide},
                                                  std::vector<int64_t>{1, kSide}));
      pointers.push_back(&sources.back()->managed);
    }
    abr_batch_report report = ABR_BATCH_REPORT_INIT;
    REQUIRE_MESSAGE(abr_to_device_many(rt, pointers.data(), 3, cuda0, nullptr, nullptr, out.data(), &report) == ABR_OK,
                    abr_last_error());
    CHECK_FALSE(streamed(report));
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      Owned back(move_to(rt, out[i], cpu));  // consumes the result
      const auto* got = static_cast<const int32_t*>(back->data);
      bool transposed = true;
      for (int64_t r = 0; r < kSide && transposed; ++r)
        for (int64_t c = 0; c < kSide; ++c) transposed = transposed && got[r * kSide + c] == data[i][c * kSide + r];
      CHECK(transposed);
    }
  }
  {  // page-locked sources (cuda_host): one DMA each
    Batch pinned(std::vector<std::size_t>(3, kSide * kSide));
    REQUIRE(pinned.to(rt, cuda_host) == ABR_OK);
    std::vector<DLManagedTensorVersioned*> locked = pinned.out, out(3, nullptr);
    std::fill(pinned.out.begin(), pinned.out.end(), nullptr);  // consumed below
    abr_batch_report report = ABR_BATCH_REPORT_INIT;
    REQUIRE_MESSAGE(abr_to_device_many(rt, locked.data(), 3, cuda0, nullptr, nullptr, out.data(), &report) == ABR_OK,
                    abr_last_error());
    CHECK_FALSE(streamed(report));
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(read_back(rt, out[i]->dl_tensor) == pinned.data[i]);
      out[i]->deleter(out[i]);
    }
  }
}
