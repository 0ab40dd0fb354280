// abr_to_device_many on CUDA (the fake driver in CI, a GPU with make gpu-check):
// 64 small tensors from pageable memory move with one DMA through one pinned
// block into one device allocation; every result holds its own values; on a
// lagging stream the sources are held until the stream's work is done.
#include <memory>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"

using namespace test;

namespace {

struct Batch {
  std::vector<std::vector<int32_t>> data;
  std::vector<std::unique_ptr<Managed>> sources;
  std::vector<DLManagedTensorVersioned*> pointers;
  std::vector<DLManagedTensorVersioned*> out;
  Batch(int tensors, std::size_t elements) {
    for (int i = 0; i < tensors; ++i) {
      data.push_back(iota(elements, i * 100000));
      sources.push_back(
          std::make_unique<Managed>(data.back().data(), i32, std::vector<int64_t>{static_cast<int64_t>(elements)}));
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
  REQUIRE_MESSAGE(batch.to(rt, cuda0, nullptr, &report) == ABR_OK, abr_last_error());
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

TEST_CASE_FIXTURE(NoDriverFindings, "batch: on a lagging stream the sources are held until its work is done") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  Batch batch(16, 2048);
  {
    Lag lag(20000);  // every DMA lags the host by 20 ms
    REQUIRE_MESSAGE(batch.to(rt, cuda0, stream) == ABR_OK, abr_last_error());
    if (lag.fake) CHECK(batch.deleted() == 0);  // the DMA that reads them has not run yet
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  CHECK(batch.deleted() == 16);
  for (std::size_t i = 0; i < 16; ++i) CHECK(read_back(rt, batch.out[i]->dl_tensor) == batch.data[i]);
  abr_stream_destroy(stream);
}

TEST_CASE_FIXTURE(NoDriverFindings, "batch: to cuda_host, each result page-locked memory of its own") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  Batch batch(8, 100);
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = ABR_COPY_ALWAYS;
  REQUIRE(abr_to_device_many(rt, batch.pointers.data(), 8, cuda_host, &options, nullptr, batch.out.data(), nullptr) ==
          ABR_OK);
  for (std::size_t i = 0; i < 8; ++i) {
    const DLTensor& t = batch.out[i]->dl_tensor;
    CHECK(t.device.device_type == kDLCUDAHost);
    CHECK(std::vector<int32_t>(static_cast<int32_t*>(t.data), static_cast<int32_t*>(t.data) + 100) == batch.data[i]);
  }
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
// copy into pageable memory per tensor.
TEST_CASE_FIXTURE(NoDriverFindings, "batch: 32 small cuda:0 tensors to the CPU wait for the device once") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  Batch batch(32, 1024);
  REQUIRE(batch.to(rt, cuda0) == ABR_OK);
  std::vector<DLManagedTensorVersioned*> on_device = batch.out, on_host(32, nullptr);
  const char* const sync = "calls:" ABR_TEST_CUDA_SYMBOL(cuStreamSynchronize);
  const char* const reads = "calls:" ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoHAsync);
  const long long syncs_before = fake ? fake.stat(sync) : 0, reads_before = fake ? fake.stat(reads) : 0;
  const long long pageable_before = fake ? fake.stat("pageable_async_copies") : 0;
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(
      abr_to_device_many(rt, on_device.data(), 32, cpu, nullptr, nullptr, on_host.data(), &report) == ABR_OK,
      abr_last_error());
  std::fill(batch.out.begin(), batch.out.end(), nullptr);  // consumed by the second batch
  if (fake) {
    CHECK(fake.stat(reads) - reads_before == 32);
    CHECK(fake.stat(sync) - syncs_before == 1);
    CHECK(fake.stat("pageable_async_copies") - pageable_before == 0);
  }
  CHECK(report.copies == 32);
  for (std::size_t i = 0; i < 32; ++i) {
    CAPTURE(i);
    const DLTensor& t = on_host[i]->dl_tensor;
    REQUIRE(t.device.device_type == kDLCPU);
    CHECK(std::vector<int32_t>(static_cast<int32_t*>(t.data), static_cast<int32_t*>(t.data) + 1024) == batch.data[i]);
    on_host[i]->deleter(on_host[i]);
  }
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
    REQUIRE_MESSAGE(abr_copy_many(rt, srcs, dsts, 2, nullptr, nullptr, nullptr) == ABR_OK, abr_last_error());
  }
  const std::vector<int32_t> got = read_back(rt, *result);
  bool transposed_right = true;
  for (int64_t i = 0; i < kSide && transposed_right; ++i)
    for (int64_t j = 0; j < kSide; ++j)
      transposed_right = transposed_right && got[i * kSide + j] == data[j * kSide + i];
  CHECK(transposed_right);
}
