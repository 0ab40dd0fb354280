// Staged transfers through the one pipeline (lib/run/pipeline.hpp) on the fake CUDA
// driver (every stream lags) and PoCL: several chunks each way, device-side
// packing, casting and scattering on either backend, and a caller's stream that
// returns before its DMAs have run. Chunks are 1 MiB here, so a few MiB of data
// make several chunks.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"

using namespace test;

namespace {

constexpr DLDevice kOpenCl{kDLOpenCL, 0};

DLTensor view(void* data, DLDevice device, DLDataType dtype, std::vector<int64_t>& shape,
              std::vector<int64_t>& strides) {
  DLTensor t{};
  t.data = data;
  t.device = device;
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = shape.data();
  t.strides = strides.empty() ? nullptr : strides.data();
  return t;
}

void copy_ok(abr_runtime* rt, const DLTensor& src, const DLTensor& dst, abr_stream* stream = nullptr,
             abr_casting casting = ABR_CASTING_DEFAULT) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.casting = casting;
  const abr_status status = abr_copy(rt, &src, &dst, &options, stream);
  INFO(std::string(abr_last_error()));
  REQUIRE(status == ABR_OK);
}

}  // namespace

TEST_CASE_FIXTURE(NoDriverFindings,
                  "staged into a strided CUDA view: pageable host bytes in chunks, then scattered by a kernel") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  StagingChunkMib chunks("1");
  Lag lag(200);
  const int64_t n = (int64_t{3} << 20) / 4 + 7;  // four chunks, the last one short
  std::vector<int32_t> data = iota(static_cast<std::size_t>(n), 11);
  std::vector<int32_t> zeros(static_cast<std::size_t>(2 * n), -1);
  Managed blank(zeros.data(), i32, {2 * n});
  Owned device(move_to(rt, &blank.managed, cuda0));  // 2n elements of -1
  std::vector<int64_t> shape{n}, every_other{2}, none;
  copy_ok(rt, view(data.data(), cpu, i32, shape, none), view(device->data, cuda0, i32, shape, every_other));
  Owned home(move_to(rt, take(device), cpu));
  const auto* out = static_cast<const int32_t*>(home->data);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += (out[2 * i] != data[static_cast<std::size_t>(i)]) + (out[2 * i + 1] != -1);
  CHECK(wrong == 0);
}

// A destination whose dimensions interleave (the quick stride rule refused it until
// 2026-11-30): the kernel writes each element to its own place, the others untouched.
TEST_CASE_FIXTURE(NoDriverFindings, "host to a CUDA view whose dimensions interleave, every element apart") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  std::vector<int32_t> data{1, 2, 3, 4, 5, 6}, blank(8, -1);
  Managed minus_ones(blank.data(), i32, {8});
  Owned device(move_to(rt, &minus_ones.managed, cuda0));
  std::vector<int64_t> shape{3, 2}, interleaved{2, 3}, none;  // offsets 0, 3, 2, 5, 4, 7
  copy_ok(rt, view(data.data(), cpu, i32, shape, none), view(device->data, cuda0, i32, shape, interleaved));
  Owned home(move_to(rt, take(device), cpu));
  const auto* out = static_cast<const int32_t*>(home->data);
  CHECK(std::vector<int32_t>(out, out + 8) == std::vector<int32_t>{1, -1, 3, 2, 5, 4, -1, 6});
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA <-> OpenCL in chunks with packing, casting and scattering on each side") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  StagingChunkMib chunks("1");
  Lag lag(200);
  const int64_t rows = 640, cols = 1000;  // 2.4 MiB of int32, 4.9 MiB as float64
  std::vector<int32_t> data = iota(static_cast<std::size_t>(rows * cols), -5000);
  Managed source(data.data(), i32, {rows, cols});
  Owned on_cuda(move_to(rt, &source.managed, cuda0));
  // The transpose of the CUDA tensor, converted to float64: packed and cast by a CUDA kernel.
  Managed transposed(on_cuda->data, i32, {cols, rows}, {1, cols}, 0, cuda0);
  transposed.managed.deleter = nullptr;
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  Owned on_cl(move_to(rt, &transposed.managed, kOpenCl, &report, nullptr, f64));
  CHECK(report.path == ABR_PATH_STAGED);
  CHECK((report.flags & ABR_REPORT_PACKED) != 0);
  CHECK((report.flags & ABR_REPORT_CAST) != 0);
  INFO(std::string(report.detail));
  CHECK(std::string(report.detail).find("1 MiB chunks") != std::string::npos);
  // Back into the CUDA tensor's transpose, as int32 (float to integer: casting "unsafe"): cast by an OpenCL
  // kernel, scattered by a CUDA one.
  std::vector<int32_t> blank(data.size(), 0);
  Managed zeros(blank.data(), i32, {rows, cols});
  Owned target(move_to(rt, &zeros.managed, cuda0));
  std::vector<int64_t> t_shape{cols, rows}, t_strides{1, cols}, none;
  copy_ok(rt, on_cl.t->dl_tensor, view(target->data, cuda0, i32, t_shape, t_strides), nullptr, ABR_CASTING_UNSAFE);
  Owned home(move_to(rt, take(target), cpu));
  CHECK(std::memcmp(home->data, data.data(), data.size() * 4) == 0);
  const abr_pool_stats stats = pool_stats(rt);
  CHECK(stats.bytes_in_use == 0);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "staged uploads on a caller's stream return before their DMAs ran; no block is refilled early") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  StagingChunkMib chunks("1");
  Lag lag(500);  // every DMA lags: a block refilled too early shows as wrong data
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  const std::size_t n = (std::size_t{5} << 20) / 8;  // 2.5 MiB: three chunks
  std::vector<std::vector<int32_t>> inputs;
  for (int k = 0; k < 4; ++k) inputs.push_back(iota(n, k * 1000003));
  std::vector<Owned> uploaded;
  std::deque<Managed> sources;  // the stream releases them when their DMAs have run
  for (int k = 0; k < 4; ++k) {
    // The last upload's DMAs lag 20 ms each, so that its blocks are still guarded when
    // the statistics are read below, however late this thread runs on a loaded machine.
    if (k == 3 && lag.fake) lag.fake.control("delay_us", 20000);
    Managed& source = sources.emplace_back(inputs[static_cast<std::size_t>(k)].data(), i32,
                                           std::vector<int64_t>{static_cast<int64_t>(n)});
    abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
    uploaded.emplace_back(move_to(rt, &source.managed, cuda0, &report, stream));
    CHECK(report.path == ABR_PATH_STAGED);
  }
  if (lag.fake) {  // the calls returned with DMAs still queued: their blocks are back, but guarded
    const abr_pool_stats stats = pool_stats(rt);
    CHECK(stats.bytes_waiting > 0);
    CHECK(stats.bytes_in_use == 0);
    lag.fake.control("delay_us", 500);
  }
  std::vector<Owned> homes;
  for (Owned& u : uploaded) homes.emplace_back(move_to(rt, take(u), cpu, nullptr, stream));
  REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  for (std::size_t k = 0; k < 4; ++k) CHECK(std::memcmp(homes[k]->data, inputs[k].data(), n * 4) == 0);
  abr_stream_destroy(stream);
  for (const Managed& source : sources) CHECK(source.deleted == 1);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "a strided or converted host side is packed or scattered row by row, one chunk at a time") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  StagingChunkMib chunks("1");
  Lag lag(200);
  const int64_t rows = 640, cols = 1000;
  std::vector<float> data(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f;

  // Up: the host transpose, converted to float64 on the way (5 MiB: five chunks of whole 5 KiB rows).
  Managed transposed(data.data(), f32, {cols, rows}, {1, cols});
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  Owned up(move_to(rt, &transposed.managed, cuda0, &report, nullptr, f64));
  CHECK(report.path == ABR_PATH_STAGED);
  INFO(std::string(report.detail));
  CHECK(std::string(report.detail).find("packed/converted on the host") != std::string::npos);
  Owned home(move_to(rt, take(up), cpu));
  const auto* got = static_cast<const double*>(home->data);
  int64_t wrong = 0;
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) wrong += got[c * rows + r] != static_cast<double>(data[r * cols + c]);
  CHECK(wrong == 0);

  // Down: a CUDA tensor into a transposed host view of an existing array (abr_copy).
  Managed plain(data.data(), f32, {rows, cols});
  Owned on_device(move_to(rt, &plain.managed, cuda0));
  std::vector<float> landing(data.size(), -1.0f);
  std::vector<int64_t> shape{rows, cols}, strides{1, rows}, none;
  DLTensor target{landing.data(), cpu, 2, f32, shape.data(), strides.data(), 0};
  REQUIRE_MESSAGE(abr_copy(rt, &*on_device, &target, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
  wrong = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) wrong += landing[c * rows + r] != data[r * cols + c];
  CHECK(wrong == 0);

  // A row longer than a chunk cannot be cut: packed whole into one pinned block, one DMA.
  Managed two_rows(data.data(), f32, {2, rows * cols / 2}, {1, 2});
  Owned whole(move_to(rt, &two_rows.managed, cuda0, &report));
  CHECK(report.path == ABR_PATH_HOST_TO_DEVICE);
  const abr_pool_stats stats = pool_stats(rt);
  CHECK(stats.bytes_in_use == 0);
}

// On an H100 NVIDIA's OpenCL moved CUDA's page-locked blocks at its pageable speed,
// and CUDA OpenCL's mapped ones at its own: 7-11 GB/s either way. The blocks must be
// OpenCL's, registered with CUDA (40-44 GB/s): no CUDA page-locked block, and no
// CUDA copy from memory CUDA has not page-locked.
TEST_CASE_FIXTURE(
    NoDriverFindings,
    "CUDA <-> OpenCL stages through OpenCL's mapped blocks registered with CUDA, unregistered when freed") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  StagingChunkMib chunks("1");
  Lag lag(200);
  const std::size_t n = (std::size_t{3} << 20) / 4 + 3;  // four chunks, the last one short
  std::vector<int32_t> data = iota(n, -77);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned on_cuda(move_to(rt, &source.managed, cuda0));
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);  // no cached CUDA block left to reuse
  const long long pinned = fake ? fake.stat("pinned_allocations") : 0;
  const long long pageable = fake ? fake.stat("pageable_async_copies") : 0;
  const long long registered = fake ? fake.stat("registered_ranges") : 0;

  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  Owned on_cl(move_to(rt, take(on_cuda), kOpenCl, &report));
  CHECK(report.path == ABR_PATH_STAGED);
  INFO(std::string(report.detail));
  CHECK(std::string(report.detail).find("pinned for both drivers") != std::string::npos);
  Owned back(move_to(rt, take(on_cl), cuda0, &report));
  CHECK(report.path == ABR_PATH_STAGED);
  if (fake) {
    CHECK(fake.stat("pinned_allocations") == pinned);         // OpenCL's blocks, not CUDA's
    CHECK(fake.stat("pageable_async_copies") == pageable);    // every CUDA copy from registered memory
    CHECK(fake.stat("registered_ranges") >= registered + 3);  // one per block in flight
  }
  Owned home(move_to(rt, take(back), cpu));
  CHECK(std::memcmp(home->data, data.data(), n * 4) == 0);
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  if (fake) CHECK(fake.stat("registered_ranges") == registered);
}

// On an H100 a one-chunk OpenCL -> CUDA copy of 4-16 KiB took about 300 us (18 us
// for the naive blocking read plus a CUDA copy): the read was queued and waited for
// through its event. A move of one chunk has nothing to overlap: its read blocks.
TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA <-> OpenCL in one chunk: the read blocks in the driver's call, no event is waited for") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  const OpenClCounter counted;
  if (!counted) {
    MESSAGE("skipped: OpenCL is not opened through tests/cuda/opencl_counter (ARRAYBRIDGE_OPENCL_LIBRARY)");
    return;
  }
  Fake fake;
  const int64_t n = 1024;  // 4 KiB
  std::vector<int32_t> data = iota(n, 3), zeros(n, 0);
  Managed source(data.data(), i32, {n}), blank_cl(zeros.data(), i32, {n}), blank_cuda(zeros.data(), i32, {n});
  Owned on_cuda(move_to(rt, &source.managed, cuda0));
  Owned on_cl(move_to(rt, &blank_cl.managed, kOpenCl));
  Owned back(move_to(rt, &blank_cuda.managed, cuda0));
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.report = &report;

  // CUDA -> OpenCL: CUDA's read waits in one stream synchronization, no event;
  // OpenCL's write, the call's last step, is one blocking write, no event either.
  const long long cuda_waits = fake ? fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuEventSynchronize)) : 0;
  const long long blocking_writes = counted("blocking_writes"), queued_writes = counted("queued_writes"),
                  cl_waits = counted("event_waits");
  REQUIRE(abr_copy(rt, &on_cuda.t->dl_tensor, &on_cl.t->dl_tensor, &options, nullptr) == ABR_OK);
  CHECK(report.path == ABR_PATH_STAGED);
  if (fake) CHECK(fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuEventSynchronize)) == cuda_waits);
  CHECK(counted("blocking_writes") == blocking_writes + 1);
  CHECK(counted("queued_writes") == queued_writes);
  CHECK(counted("event_waits") == cl_waits);
  CHECK(read_back(rt, on_cl.t->dl_tensor) == data);

  // OpenCL -> CUDA: one blocking read; CUDA's copy is waited for in its stream, so
  // the block goes back to the pool with no event recorded behind it.
  const long long blocking = counted("blocking_reads"), queued = counted("queued_reads"),
                  waits = counted("event_waits");
  const long long cuda_events = fake ? fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuEventCreate)) : 0;
  REQUIRE(abr_copy(rt, &on_cl.t->dl_tensor, &back.t->dl_tensor, &options, nullptr) == ABR_OK);
  CHECK(report.path == ABR_PATH_STAGED);
  CHECK(counted("blocking_reads") == blocking + 1);
  CHECK(counted("queued_reads") == queued);
  CHECK(counted("event_waits") == waits);
  if (fake) CHECK(fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuEventCreate)) == cuda_events);
  CHECK(read_back(rt, back.t->dl_tensor) == data);
}

// On the caller's stream the call returns with the CUDA copy queued: the block it
// reads goes back to the pool behind that copy's event, and the next move, which
// takes the same block, cannot overwrite what the lagging copy has yet to read.
TEST_CASE_FIXTURE(NoDriverFindings,
                  "OpenCL -> CUDA in one chunk on the caller's stream: queued, its block guarded by an event") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  if (!fake) return;       // the lag is the fake's
  const int64_t n = 1024;  // 4 KiB: one chunk
  std::vector<int32_t> first = iota(n, 7), second = iota(n, 50000), zeros(n, 0);
  Managed first_source(first.data(), i32, {n}), second_source(second.data(), i32, {n});
  Managed blank_a(zeros.data(), i32, {n}), blank_b(zeros.data(), i32, {n});
  Owned first_cl(move_to(rt, &first_source.managed, kOpenCl)), second_cl(move_to(rt, &second_source.managed, kOpenCl));
  Owned a(move_to(rt, &blank_a.managed, cuda0)), b(move_to(rt, &blank_b.managed, cuda0));
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  {
    Lag lag(20000);  // each CUDA copy reads its block 20 ms after the call returns
    const long long events = fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuEventRecord));
    REQUIRE(abr_copy(rt, &first_cl.t->dl_tensor, &a.t->dl_tensor, nullptr, stream) == ABR_OK);
    CHECK(fake.stat("calls:" ABR_TEST_CUDA_SYMBOL(cuEventRecord)) == events + 1);  // the block's guard
    REQUIRE(abr_copy(rt, &second_cl.t->dl_tensor, &b.t->dl_tensor, nullptr, stream) == ABR_OK);
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  abr_stream_destroy(stream);
  CHECK(read_back(rt, a.t->dl_tensor) == first);
  CHECK(read_back(rt, b.t->dl_tensor) == second);
}

TEST_CASE_FIXTURE(
    NoDriverFindings,
    "CUDA <-> OpenCL when CUDA refuses to register a block: values intact, that block copied as pageable") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  if (!fake) return;  // only the fake refuses on request
  StagingChunkMib chunks("1");
  const std::size_t n = (std::size_t{3} << 20) / 4;  // three chunks
  std::vector<int32_t> data = iota(n, 5);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned on_cl(move_to(rt, &source.managed, kOpenCl));
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  const long long pageable = fake.stat("pageable_async_copies");
  const long long registered = fake.stat("registered_ranges");
  fake.control("fail_register", 1);  // the first block's registration fails
  Owned on_cuda(move_to(rt, take(on_cl), cuda0));
  fake.control("fail_register", 0);
  CHECK(fake.stat("pageable_async_copies") > pageable);
  CHECK(fake.stat("registered_ranges") == registered + 2);
  Owned home(move_to(rt, take(on_cuda), cpu));
  CHECK(std::memcmp(home->data, data.data(), n * 4) == 0);
}

TEST_CASE_FIXTURE(
    NoDriverFindings,
    "a runtime destroyed with CUDA <-> OpenCL blocks cached unregisters them while CUDA's context lives") {
  Fake fake;
  const long long registered = fake ? fake.stat("registered_ranges") : 0;
  {
    Runtime rt;
    if (!cuda_devices(rt)) return;
    StagingChunkMib chunks("1");
    const std::size_t n = (std::size_t{2} << 20) / 4;  // two chunks
    std::vector<int32_t> data = iota(n, 9);
    Managed source(data.data(), i32, {static_cast<int64_t>(n)});
    Owned on_cl(move_to(rt, &source.managed, kOpenCl));
    Owned on_cuda(move_to(rt, take(on_cl), cuda0));
    Owned home(move_to(rt, take(on_cuda), cpu));
    CHECK(std::memcmp(home->data, data.data(), n * 4) == 0);
  }
  Fake loaded;  // the fake is loaded by now, if it is the driver
  if (loaded) CHECK(loaded.stat("registered_ranges") == registered);
}

TEST_CASE_FIXTURE(
    NoDriverFindings,
    "abr_copy with ABR_TRANSFER_NO_HOST_STAGING: CUDA <-> OpenCL refused, nothing written; a report when it runs") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  std::vector<int32_t> data = iota(1000, 3), zeros(1000, 0);
  Managed source(data.data(), i32, {1000});
  Owned on_cuda(move_to(rt, &source.managed, cuda0));
  Managed blank(zeros.data(), i32, {1000});
  Owned on_cl(move_to(rt, &blank.managed, kOpenCl));
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.flags = ABR_TRANSFER_NO_HOST_STAGING;
  options.report = &report;
  CHECK(abr_copy(rt, &*on_cuda, &*on_cl, &options, nullptr) == ABR_ERR_UNSUPPORTED);
  CHECK(error_mentions("only host staging can bridge"));
  CHECK(report.path == ABR_PATH_NONE);
  options.flags = 0;
  REQUIRE(abr_copy(rt, &*on_cuda, &*on_cl, &options, nullptr) == ABR_OK);
  CHECK(report.path == ABR_PATH_STAGED);
  CHECK(report.bytes_moved == 4000);
  Owned home(move_to(rt, take(on_cl), cpu));
  CHECK(std::memcmp(home->data, data.data(), 4000) == 0);
}
