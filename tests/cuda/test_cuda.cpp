// The CUDA backend through the C API: discovery, every path with its values,
// streams, pointer checks, out-of-memory and device loss. Against the fake
// driver in CI; against a real GPU with ARRAYBRIDGE_CUDA_LIBRARY=libcuda.so.1.
#include <cmath>
#include <complex>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/fault_walk.hpp"
#include "tests/cuda/cuda_helpers.hpp"

using namespace test;

namespace {

// Host data -> dst -> cpu; returns the host result (compact).
Owned round_trip(abr_runtime* rt, Managed& source, DLDevice via, abr_path* there = nullptr, abr_path* back = nullptr,
                 DLDataType dtype = {}) {
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  Owned on_device(move_to(rt, &source.managed, via, &report, nullptr, dtype));
  if (there) *there = report.path;
  CHECK(on_device->device.device_type == via.device_type);
  Owned home(move_to(rt, take(on_device), cpu, &report));
  if (back) *back = report.path;
  return home;
}

}  // namespace

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA discovery: devices, cuda_host and the backend line") {
  Runtime rt;
  const int n = cuda_devices(rt);
  if (n == 0) return;
  struct abr_backend_info info = ABR_BACKEND_INFO_INIT;
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_CUDA, &info) == ABR_OK);
  CHECK(std::string(info.detail).find("CUDA driver") == 0);
  int32_t count = 0;
  REQUIRE(abr_device_count(rt, &count) == ABR_OK);
  int cuda = 0, host = 0;
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info device = ABR_DEVICE_INFO_INIT;
    REQUIRE(abr_device_info(rt, i, &device) == ABR_OK);
    if (device.device.device_type == kDLCUDA) {
      ++cuda;
      CHECK(device.backend == ABR_BACKEND_CUDA);
      CHECK(device.memory_bytes > 0);
      CHECK(std::string(device.name).find("(sm_") != std::string::npos);
      CHECK((device.flags & ABR_DEVICE_SHARES_HOST_MEMORY) == 0);
    }
    if (device.device.device_type == kDLCUDAHost) {
      ++host;
      CHECK((device.flags & ABR_DEVICE_SHARES_HOST_MEMORY) != 0);
    }
  }
  CHECK(cuda == n);
  CHECK(host == 1);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA pageable host memory: staged from two chunks up, the driver's own copy below, values intact") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  if (fake) fake.control("delay_us", 2000);  // DMA lags the host: a block reused too early shows
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, (std::size_t{20} << 20) / 4 + 3}) {  // up to 3 chunks
    CAPTURE(n);
    std::vector<int32_t> data = iota(n, 7);
    Managed source(data.data(), i32, {static_cast<int64_t>(n)});
    abr_path there, back;
    Owned home = round_trip(rt, source, cuda0, &there, &back);
    CHECK(source.deleted == 1);
    const bool chunks = n * 4 >= (std::size_t{16} << 20);  // two 8 MiB chunks at least
    CHECK(there == (chunks ? ABR_PATH_STAGED : ABR_PATH_HOST_TO_DEVICE));
    CHECK(back == (chunks ? ABR_PATH_STAGED : ABR_PATH_DEVICE_TO_HOST));
    CHECK(std::memcmp(home->data, data.data(), n * 4) == 0);
  }
  if (fake) fake.control("delay_us", 0);
  const abr_pool_stats stats = pool_stats(rt);
  CHECK(stats.bytes_in_use == 0);
  CHECK(stats.hits > 0);  // later chunks and transfers reuse the pinned blocks
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA pinned memory: cuda_host results, direct DMA, and views back to the CPU") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  std::vector<double> data{1.5, -2.25, 3.0, 4.75, 5.5, 6.0};
  Managed source(data.data(), f64, {2, 3});
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  Owned pinned(move_to(rt, &source.managed, cuda_host, &report));
  CHECK(report.path == ABR_PATH_HOST_COPY);
  CHECK(pinned->device.device_type == kDLCUDAHost);
  CHECK(std::memcmp(pinned->data, data.data(), sizeof(double) * 6) == 0);

  Owned device(move_to(rt, take(pinned), cuda0, &report));
  CHECK(report.path == ABR_PATH_HOST_TO_DEVICE);  // page-locked: one async DMA, no staging
  Owned back(move_to(rt, take(device), cuda_host, &report));
  CHECK(report.path == ABR_PATH_DEVICE_TO_HOST);
  Owned view(move_to(rt, take(back), cpu, &report));
  CHECK(report.path == ABR_PATH_ZERO_COPY);  // pinned memory is host memory
  CHECK(std::memcmp(view->data, data.data(), sizeof(double) * 6) == 0);

  // CPU memory is not page-locked: ABR_COPY_NEVER to cuda_host must refuse.
  Managed plain(data.data(), f64, {6});
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_NEVER;
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, &plain.managed, cuda_host, &options, nullptr, &out) == ABR_ERR_COPY_REQUIRED);
  CHECK(error_mentions("not page-locked"));
  CHECK(plain.deleted == 0);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA abr_copy is the first call of a runtime: into another runtime's device memory") {
  Runtime maker;
  if (!cuda_devices(maker)) return;
  std::vector<int32_t> data = iota(64);
  Managed source(data.data(), i32, {64});
  Owned device(move_to(maker, &source.managed, cuda0));
  Runtime fresh;  // its device has no stream or kernels yet
  std::vector<int32_t> twice = iota(64, 1000);
  DLTensor host = source.tensor();
  host.data = twice.data();
  REQUIRE(abr_copy(fresh, &host, &*device, nullptr, nullptr) == ABR_OK);
  std::vector<int32_t> out(64);
  DLTensor back = host;
  back.data = out.data();
  Runtime another;
  REQUIRE(abr_copy(another, &*device, &back, nullptr, nullptr) == ABR_OK);
  CHECK(out == twice);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA managed memory is accepted as a source, to the CPU as a view and to a device as a copy") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  std::vector<int32_t> data = iota(32, 5);  // stands in for cuMemAllocManaged memory: host-addressable
  Managed managed(data.data(), i32, {4, 8}, {}, 0, {kDLCUDAManaged, 0});
  abr_path there;
  Owned home = round_trip(rt, managed, cuda0, &there);
  CHECK(managed.deleted == 1);
  CHECK((there == ABR_PATH_STAGED || there == ABR_PATH_HOST_TO_DEVICE));
  CHECK(std::memcmp(home->data, data.data(), 32 * 4) == 0);
  Managed again(data.data(), i32, {32}, {}, 0, {kDLCUDAManaged, 0});
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  Owned view(move_to(rt, &again.managed, cpu, &report));
  CHECK(report.path == ABR_PATH_ZERO_COPY);
  CHECK(view->data == data.data());
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA strided, negative, offset, 0-d and empty sources, with and without a cast") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  std::vector<int32_t> data = iota(24, -5);
  struct View {
    const char* name;
    std::vector<int64_t> shape, strides;
    uint64_t offset;
  };
  const View views[] = {
      {"transposed", {4, 6}, {1, 4}, 0}, {"sliced", {3, 2}, {8, 2}, 4},
      {"negative", {6}, {-1}, 5 * 4},    {"0-d", {}, {}, 12},
      {"empty", {0, 3}, {3, 1}, 0},      {"size-1 dims", {1, 24, 1}, {99, 1, 7}, 0},
  };
  for (const View& v : views) {
    for (bool cast : {false, true}) {
      CAPTURE(v.name);
      CAPTURE(cast);
      Managed source(data.data(), i32, v.shape, v.strides, v.offset);
      abr_path there;
      Owned home = round_trip(rt, source, cuda0, &there, nullptr, cast ? f64 : DLDataType{});
      CHECK(source.deleted == 1);
      std::vector<int64_t> shape = v.shape;
      std::size_t i = 0;
      bool same = true;
      for_each_index(shape, [&](const std::vector<int64_t>& index) {
        int32_t expected;
        std::memcpy(&expected, element_at(source.tensor(), index, 4), 4);
        if (cast)
          same &= static_cast<const double*>(home->data)[i++] == static_cast<double>(expected);
        else
          same &= static_cast<const int32_t*>(home->data)[i++] == expected;
      });
      CHECK(same);
    }
  }
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA every dtype survives a device cast and back") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  const DLDataType types[] = {dt(kDLBool, 8),
                              dt(kDLInt, 8),
                              dt(kDLInt, 16),
                              dt(kDLInt, 64),
                              dt(kDLUInt, 8),
                              dt(kDLUInt, 16),
                              dt(kDLUInt, 32),
                              dt(kDLUInt, 64),
                              dt(kDLFloat, 16),
                              dt(kDLBfloat, 16),
                              f32,
                              f64,
                              dt(kDLComplex, 64),
                              dt(kDLComplex, 128)};
  std::vector<int32_t> data{0, 1, 2, 3, 100, 7};
  for (const DLDataType& type : types) {
    CAPTURE(int(type.code));
    CAPTURE(int(type.bits));
    // int32 on the host -> device -> cast on the device to `type` -> back to int32 on the device -> host.
    Managed source(data.data(), i32, {6});
    Owned device(move_to(rt, &source.managed, cuda0));
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.dtype = type;
    abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
    options.report = &report;
    options.copy = ABR_COPY_ALWAYS;
    DLManagedTensorVersioned* converted = nullptr;
    REQUIRE(abr_to_device(rt, take(device), cuda0, &options, nullptr, &converted) == ABR_OK);
    CHECK(report.path == ABR_PATH_DEVICE_COPY);
    CHECK((report.flags & ABR_REPORT_CAST) != 0);
    options.dtype = i32;
    DLManagedTensorVersioned* again = nullptr;
    REQUIRE(abr_to_device(rt, converted, cpu, &options, nullptr, &again) == ABR_OK);
    Owned home(again);
    const int32_t* got = static_cast<const int32_t*>(home->data);
    for (int i = 0; i < 6; ++i) CHECK(got[i] == (type.code == kDLBool ? data[i] != 0 : data[i]));
  }
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA device copies: strided device views are packed by kernels, overlapping copies are safe") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  std::vector<float> data(12);
  for (int i = 0; i < 12; ++i) data[i] = static_cast<float>(i) * 0.5f;
  Managed source(data.data(), f32, {12});
  Owned device(move_to(rt, &source.managed, cuda0));
  const long long launches = fake ? fake.stat("launches") : 0;

  // A transposed view of the device buffer as (3, 4) -> (4, 3), copied out.
  std::vector<int64_t> shape{4, 3}, strides{1, 4};
  DLTensor view = *device;
  view.ndim = 2;
  view.shape = shape.data();
  view.strides = strides.data();
  std::vector<float> out(12, -1.0f);
  std::vector<int64_t> out_shape{4, 3};
  DLTensor host{out.data(), cpu, 2, f32, out_shape.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &view, &host, nullptr, nullptr) == ABR_OK);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) CHECK(out[r * 3 + c] == data[c * 4 + r]);
  if (fake) CHECK(fake.stat("launches") > launches);  // packed on the device, not on the host

  // Overlapping: shift the buffer right by one element in place.
  std::vector<int64_t> eleven{11};
  DLTensor from = *device, to = *device;
  from.ndim = to.ndim = 1;
  from.shape = to.shape = eleven.data();
  to.byte_offset = 4;
  REQUIRE(abr_copy(rt, &from, &to, nullptr, nullptr) == ABR_OK);
  std::vector<float> shifted(12);
  DLTensor back{shifted.data(), cpu, 1, f32, nullptr, nullptr, 0};
  std::vector<int64_t> twelve{12};
  back.shape = twelve.data();
  DLTensor whole = *device;
  REQUIRE(abr_copy(rt, &whole, &back, nullptr, nullptr) == ABR_OK);
  CHECK(shifted[0] == data[0]);
  for (int i = 1; i < 12; ++i) CHECK(shifted[i] == data[i - 1]);
}

// torch's x[:-1] and x[1:] on a GPU are two data pointers into one allocation (DLPack's
// byte_offset is 0): overlap was seen only between views of one pointer, so these went
// without their temporary, into a copy whose threads race (the fake driver reports it).
TEST_CASE_FIXTURE(NoDriverFindings, "CUDA copies between overlapping views with different data pointers are safe") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  std::vector<float> data(24);
  for (int i = 0; i < 24; ++i) data[i] = static_cast<float>(i) + 0.5f;
  Managed source(data.data(), f32, {24});
  Owned device(move_to(rt, &source.managed, cuda0));
  char* const base = static_cast<char*>(device->data);
  auto read_back = [&] {
    std::vector<float> out(24);
    std::vector<int64_t> shape{24};
    DLTensor whole = *device, host{out.data(), cpu, 1, f32, shape.data(), nullptr, 0};
    REQUIRE(abr_copy(rt, &whole, &host, nullptr, nullptr) == ABR_OK);
    return out;
  };

  std::vector<int64_t> eleven{11};
  DLTensor head{base, cuda0, 1, f32, eleven.data(), nullptr, 0},
      tail{base + 4, cuda0, 1, f32, eleven.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &head, &tail, nullptr, nullptr) == ABR_OK);  // x[1:12] = x[0:11]
  std::vector<float> expected = data;
  std::memmove(expected.data() + 1, expected.data(), 11 * sizeof(float));
  CHECK(read_back() == expected);

  // A transposed view copied onto bytes it reads: a kernel's walk, not a memcpy.
  std::vector<int64_t> shape{4, 3}, transposed{1, 4};
  DLTensor columns{base, cuda0, 2, f32, shape.data(), transposed.data(), 0};
  DLTensor rows{base + 16, cuda0, 2, f32, shape.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &columns, &rows, nullptr, nullptr) == ABR_OK);
  const std::vector<float> shifted = expected;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) expected[4 + r * 3 + c] = shifted[c * 4 + r];
  CHECK(read_back() == expected);

  // x[0::2] = x[1::2], each its own pointer: their bounding boxes meet, their bytes do not,
  // so one kernel walk moves them, without a temporary (the fake checks every element).
  std::vector<int64_t> twelve{12}, every_other{2};
  DLTensor odd{base + 4, cuda0, 1, f32, twelve.data(), every_other.data(), 0};
  DLTensor even{base, cuda0, 1, f32, twelve.data(), every_other.data(), 0};
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.report = &report;
  REQUIRE(abr_copy(rt, &odd, &even, &options, nullptr) == ABR_OK);
  CHECK(std::string(report.detail).find("temporary") == std::string::npos);
  for (int i = 0; i < 24; i += 2) expected[i] = expected[i + 1];
  CHECK(read_back() == expected);
}

// Managed memory has one address for the host and the device (unified addressing):
// viewed as cuda_managed (host memory) and as cuda:0, a copy between its views may
// overlap. Before, only host bytes were compared with host bytes, so the copy went as
// a DMA between the same bytes (the fake reports it; a GPU copies in any order).
TEST_CASE_FIXTURE(NoDriverFindings, "CUDA a copy between managed memory's views as cuda_managed and as cuda:0") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  RawDriver driver;
  CUdeviceptr managed = 0;
  REQUIRE(driver.alloc_managed(&managed, 64, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
  auto* values = reinterpret_cast<float*>(managed);
  for (int i = 0; i < 16; ++i) values[i] = static_cast<float>(i);
  std::vector<int64_t> eight{8};
  const DLDevice cuda_managed{kDLCUDAManaged, 0};
  DLTensor second{values + 1, cuda_managed, 1, f32, eight.data(), nullptr, 0};
  DLTensor first{values, cuda0, 1, f32, eight.data(), nullptr, 0};
  CHECK(abr_copy(rt, &second, &first, nullptr, nullptr) == ABR_ERR_UNSUPPORTED);  // x[0:8] = x[1:9]
  CHECK_MESSAGE(error_mentions("share host bytes"), std::string(abr_last_error()));
  CHECK(abr_copy(rt, &first, &second, nullptr, nullptr) == ABR_ERR_UNSUPPORTED);  // x[1:9] = x[0:8]
  for (int i = 0; i < 16; ++i) CHECK(values[i] == static_cast<float>(i));         // nothing moved
  // Views apart: the copy goes, and the host sees the device's writes.
  DLTensor second_half{values + 8, cuda_managed, 1, f32, eight.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &first, &second_half, nullptr, nullptr) == ABR_OK);
  for (int i = 0; i < 8; ++i) CHECK(values[8 + i] == static_cast<float>(i));
  CHECK(driver.free(managed) == CUDA_SUCCESS);
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA peer copies between devices, and staging to and from OpenCL") {
  Runtime rt;
  const int n = cuda_devices(rt);
  if (n == 0) return;
  std::vector<int32_t> data = iota(1000, 3);
  Managed source(data.data(), i32, {10, 100});
  Owned on0(move_to(rt, &source.managed, cuda0));
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  Owned next(nullptr);
  if (n > 1) {
    next.t = move_to(rt, take(on0), cuda1, &report);
    CHECK(report.path == ABR_PATH_PEER);
    CHECK(next->device.device_id == 1);
  } else {
    MESSAGE("one CUDA device: the peer path is not exercised");
    next.t = take(on0);
  }
  Owned on_cl(move_to(rt, take(next), {kDLOpenCL, 0}, &report));
  CHECK(report.path == ABR_PATH_STAGED);
  CHECK(std::string(report.detail).find("between backends") != std::string::npos);
  Owned again(move_to(rt, take(on_cl), cuda0, &report));
  CHECK(report.path == ABR_PATH_STAGED);
  Owned home(move_to(rt, take(again), cpu));
  CHECK(std::memcmp(home->data, data.data(), data.size() * 4) == 0);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA <-> OpenCL in chunks: several 8 MiB chunks each way, values intact, blocks back in the pool") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  if (fake) fake.control("delay_us", 1000);               // the CUDA side lags: a block reused too early shows
  const std::size_t n = (std::size_t{20} << 20) / 4 + 5;  // three chunks, the last one short
  std::vector<int32_t> data = iota(n, -100);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned on_cuda(move_to(rt, &source.managed, cuda0));
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  Owned on_cl(move_to(rt, take(on_cuda), {kDLOpenCL, 0}, &report));
  CHECK(report.path == ABR_PATH_STAGED);
  Owned back(move_to(rt, take(on_cl), cuda1.device_id < cuda_devices(rt) ? cuda1 : cuda0, &report));
  CHECK(report.path == ABR_PATH_STAGED);
  Owned home(move_to(rt, take(back), cpu));
  CHECK(std::memcmp(home->data, data.data(), n * 4) == 0);
  if (fake) fake.control("delay_us", 0);
  const abr_pool_stats stats = pool_stats(rt);
  CHECK(stats.bytes_in_use == 0);
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA streams: async transfers in stream order, pool reuse waits for the DMA") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  if (fake) fake.control("delay_us", 300);  // every operation lags: missing waits show as wrong data
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  std::vector<std::vector<int32_t>> inputs;
  std::vector<Owned> results;
  for (int k = 0; k < 6; ++k) inputs.push_back(iota(4096, k * 10000));
  for (int k = 0; k < 6; ++k) {
    // Through cuda_host first so the upload is a direct async DMA on the stream.
    Managed source(inputs[k].data(), i32, {4096});
    Owned pinned(move_to(rt, &source.managed, cuda_host));
    results.emplace_back(move_to(rt, take(pinned), cuda0, nullptr, stream));
  }
  std::vector<Owned> homes;
  for (Owned& r : results) homes.emplace_back(move_to(rt, take(r), cpu, nullptr, stream));
  REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  for (int k = 0; k < 6; ++k) CHECK(std::memcmp(homes[k]->data, inputs[k].data(), 4096 * 4) == 0);
  abr_stream_destroy(stream);
  if (fake) fake.control("delay_us", 0);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA stream values: 1 and 2 are the legacy and per-thread streams, 0 and junk are refused") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  for (uintptr_t value : {uintptr_t{1}, uintptr_t{2}}) {
    abr_stream* stream = nullptr;
    REQUIRE(abr_stream_wrap(rt, cuda0, reinterpret_cast<void*>(value), &stream) == ABR_OK);
    std::vector<int32_t> data = iota(64);
    Managed source(data.data(), i32, {64});
    Owned device(move_to(rt, &source.managed, cuda0, nullptr, stream));
    Owned home(move_to(rt, take(device), cpu, nullptr, stream));
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
    CHECK(std::memcmp(home->data, data.data(), 64 * 4) == 0);
    abr_stream_destroy(stream);
  }
  abr_stream* stream = nullptr;
  CHECK(abr_stream_wrap(rt, cuda0, nullptr, &stream) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("NULL"));
  Fake fake;
  if (fake) {  // a real driver may crash on a handle that is not a stream
    CHECK(abr_stream_wrap(rt, cuda0, reinterpret_cast<void*>(uintptr_t{3}), &stream) == ABR_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("not a CUDA stream"));
  }
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA pointers are checked: host memory, the wrong device, a view past its allocation") {
  Runtime rt;
  const int n = cuda_devices(rt);
  if (n == 0) return;
  std::vector<int32_t> host = iota(16);
  Managed liar(host.data(), i32, {16}, {}, 0, cuda0);
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, &liar.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_DLPACK_DATA);
  CHECK(error_mentions("not CUDA device memory"));
  CHECK(liar.deleted == 0);

  Managed source(host.data(), i32, {16});
  Owned device(move_to(rt, &source.managed, cuda0));
  // The result's allocation is its size class (4 KiB here, device_cache.hpp): a view past that.
  Managed too_long(device->data, i32, {1 << 16}, {}, 0, cuda0);
  CHECK(abr_to_device(rt, &too_long.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_DLPACK_DATA);
  CHECK(error_mentions("ends before"));
  if (n > 1) {
    Managed wrong(device->data, i32, {16}, {}, 0, cuda1);
    CHECK(abr_to_device(rt, &wrong.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_DLPACK_DEVICE);
    CHECK(error_mentions("memory is on cuda:0"));
  }
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA out of memory: a clean status, the source still the caller's, the runtime still working") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  if (!fake) return;
  std::vector<int32_t> data = iota(256);
  for (long long nth : {1, 2, 3}) {
    CAPTURE(nth);
    REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);  // so the staging blocks are allocated again
    fake.control("fail_alloc", nth);
    Managed source(data.data(), i32, {256});
    DLManagedTensorVersioned* out = nullptr;
    const abr_status status = abr_to_device(rt, &source.managed, cuda0, nullptr, nullptr, &out);
    fake.control("fail_alloc", 0);
    if (status == ABR_OK) {  // fewer allocations than nth on this path
      Owned done(out);
      continue;
    }
    CHECK(status == ABR_ERR_OUT_OF_MEMORY);
    CHECK(error_mentions("CUDA_ERROR_OUT_OF_MEMORY"));
    CHECK(abr_last_error_backend_code() == CUDA_ERROR_OUT_OF_MEMORY);  // the CUresult, to branch on
    CHECK(source.deleted == 0);
    CHECK(out == nullptr);
  }
  Managed source(data.data(), i32, {256});
  Owned home = round_trip(rt, source, cuda0);
  CHECK(std::memcmp(home->data, data.data(), 256 * 4) == 0);
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA memory is all given back: device buffers and pinned blocks") {
  Fake fake;
  if (!fake) return;
  {
    Runtime rt;
    if (!cuda_devices(rt)) return;
    const long long allocated = fake.stat("device_allocations");
    {
      std::vector<int32_t> data = iota(5000);
      Managed source(data.data(), i32, {50, 100}, {1, 50});  // strided: a kernel and temporaries
      Owned home = round_trip(rt, source, cuda0, nullptr, nullptr, f64);
      CHECK(fake.stat("device_allocations") >= allocated);
    }
    abr_stream* stream = nullptr;
    REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
    abr_stream_destroy(stream);  // its queued frees have run
    uint64_t released = 0;
    REQUIRE(abr_pool_trim(rt, &released) == ABR_OK);  // and deleted tensors' memory is back
    CHECK(fake.stat("device_allocations") == allocated);
    CHECK(fake.stat("pinned_allocations") == 0);
  }
}

#ifdef ABR_FAULT_INJECTION
TEST_CASE_FIXTURE(
    NoDriverFindings,
    "CUDA: every injected failure of a transfer is clean: status, ownership, no leak, runtime still works") {
  Runtime rt;
  const int n = cuda_devices(rt);
  if (n == 0) return;
  std::vector<float> data(64 * 48);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.25f;
  Managed upload(data.data(), f32, {64, 48});
  Owned on0(move_to(rt, &upload.managed, cuda0));
  auto on_device = [&](std::vector<int64_t> shape, std::vector<int64_t> strides) {
    return std::make_unique<Managed>(on0->data, f32, std::move(shape), std::move(strides), 0, cuda0);
  };
  // Staged scenarios in several chunks: a failure at every stage of the pipeline
  // (a block, a read, a write, an event, a kernel) with earlier chunks in flight.
  StagingChunkMib chunks("1");
  const int64_t rows = 640, cols = 1000;  // 2.4 MiB of float32: three 1 MiB chunks
  std::vector<float> big(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 9973) - 17.0f;
  Managed big_upload(big.data(), f32, {rows, cols});
  Owned big_on0(move_to(rt, &big_upload.managed, cuda0));
  // A scenario's tensors moved there and back: the last ones exist exactly when it succeeded.
  const auto delete_results = [](abr_status status, const std::vector<DLManagedTensorVersioned*>& there,
                                 const std::vector<DLManagedTensorVersioned*>& back) {
    for (DLManagedTensorVersioned* t : there)
      if (t) t->deleter(t);
    for (DLManagedTensorVersioned* t : back) {
      CHECK((status == ABR_OK) == (t != nullptr));
      if (t) t->deleter(t);
    }
  };
  const std::vector<Scenario> scenarios = {
      {"host pageable -> cuda, three chunks",
       [&](abr_runtime* r, int& deleted) {
         Managed src(big.data(), f32, {rows, cols});
         return transfer(r, src, cuda0, ABR_COPY_ALWAYS, {}, nullptr, deleted);
       }},
      {"cuda -> host pageable, three chunks",
       [&](abr_runtime* r, int& deleted) {
         Managed src(big_on0->data, f32, {rows, cols}, {}, 0, cuda0);
         return transfer(r, src, cpu, ABR_COPY_ALWAYS, {}, nullptr, deleted);
       }},
      {"host transposed -> cuda as f64, packed and cast on the host row by row, five chunks",
       [&](abr_runtime* r, int& deleted) {
         Managed src(big.data(), f32, {cols, rows}, {1, cols});
         return transfer(r, src, cuda0, ABR_COPY_ALWAYS, f64, nullptr, deleted);
       }},
      {"cuda transposed -> opencl as f64, packed and cast by a kernel, five chunks",
       [&](abr_runtime* r, int& deleted) {
         Managed src(big_on0->data, f32, {cols, rows}, {1, cols}, 0, cuda0);
         return transfer(r, src, {kDLOpenCL, 0}, ABR_COPY_ALWAYS, f64, nullptr, deleted);
       }},
      {"host pageable -> cuda on a new stream, three chunks",
       [&](abr_runtime* r, int& deleted) {
         Managed src(big.data(), f32, {rows, cols});
         return transfer_on_new_stream(r, src, cuda0, deleted);
       }},
      {"host pageable -> cuda, staged in chunks",
       [&](abr_runtime* r, int& deleted) {
         Managed src(data.data(), f32, {64, 48});
         return transfer(r, src, cuda0, ABR_COPY_ALWAYS, {}, nullptr, deleted);
       }},
      {"host strided -> cuda, cast to f64 in pinned staging",
       [&](abr_runtime* r, int& deleted) {
         Managed src(data.data(), f32, {48, 64}, {1, 48});
         return transfer(r, src, cuda0, ABR_COPY_ALWAYS, f64, nullptr, deleted);
       }},
      {"cuda strided -> host, packed by a kernel",
       [&](abr_runtime* r, int& deleted) {
         auto src = on_device({48, 64}, {1, 48});
         return transfer(r, *src, cpu, ABR_COPY_ALWAYS, {}, nullptr, deleted);
       }},
      {"cuda -> cuda_host",
       [&](abr_runtime* r, int& deleted) {
         abr_pool_trim(r, nullptr);  // the last run's block may be back or not yet: make it a miss every time
         auto src = on_device({64, 48}, {});
         return transfer(r, *src, cuda_host, ABR_COPY_ALWAYS, {}, nullptr, deleted);
       }},
      {"cuda -> cuda:1 (or cuda:0), cast",
       [&](abr_runtime* r, int& deleted) {
         auto src = on_device({64, 48}, {});
         return transfer(r, *src, n > 1 ? cuda1 : cuda0, ABR_COPY_ALWAYS, f64, nullptr, deleted);
       }},
      {"cuda -> opencl, staged between backends",
       [&](abr_runtime* r, int& deleted) {
         auto src = on_device({64, 48}, {});
         return transfer(r, *src, {kDLOpenCL, 0}, ABR_COPY_ALWAYS, {}, nullptr, deleted);
       }},
      {"host -> cuda on a new stream",
       [&](abr_runtime* r, int& deleted) {
         Managed src(data.data(), f32, {64, 48});
         return transfer_on_new_stream(r, src, cuda0, deleted);
       }},
      {"a batch to cuda: six coalesced through one pinned block, one large staged",
       [&](abr_runtime* r, int& deleted) {
         std::vector<std::unique_ptr<Managed>> sources;
         std::vector<DLManagedTensorVersioned*> pointers, out(7, nullptr);
         for (int i = 0; i < 6; ++i)
           sources.push_back(std::make_unique<Managed>(data.data() + i * 64, f32, std::vector<int64_t>{64}));
         sources.push_back(std::make_unique<Managed>(big.data(), f32, std::vector<int64_t>{rows, cols}));
         for (auto& source : sources) pointers.push_back(&source->managed);
         const abr_status status =
             abr_to_device_many(r, pointers.data(), 7, cuda0, nullptr, nullptr, out.data(), nullptr);
         deleted = 0;
         for (auto& source : sources) deleted += source->deleted;
         for (DLManagedTensorVersioned* t : out) {
           CHECK((status == ABR_OK) == (t != nullptr));
           if (t) t->deleter(t);
         }
         return status;
       }},
      {"a batch to cuda and back, streamed through one pipeline",
       [&](abr_runtime* r, int& deleted) {
         const int64_t half = rows * cols / 2;  // 1.2 MiB each: three 1 MiB chunks between them
         Managed first(big.data(), f32, {half}), second(big.data() + half, f32, {half});
         std::vector<DLManagedTensorVersioned*> pointers{&first.managed, &second.managed}, out(2, nullptr),
             back(2, nullptr);
         abr_batch_report report = ABR_BATCH_REPORT_INIT;
         abr_status status = abr_to_device_many(r, pointers.data(), 2, cuda0, nullptr, nullptr, out.data(), &report);
         if (status == ABR_OK) {  // a pipeline the pool refuses (an injected failure) moves one by one
           const std::string detail = report.detail;
           CHECK((detail.find("2 streamed") != std::string::npos ||
                  detail.find("2 moved one by one") != std::string::npos));
         }
         deleted = first.deleted + second.deleted;
         if (status == ABR_OK && deleted != 2) status = ABR_ERR_INTERNAL;
         if (status == ABR_OK) {  // back, from views of those results whose deleters are counted
           Managed down0(out[0]->dl_tensor.data, f32, {half}, {}, 0, cuda0),
               down1(out[1]->dl_tensor.data, f32, {half}, {}, 0, cuda0);
           std::vector<DLManagedTensorVersioned*> views{&down0.managed, &down1.managed};
           status = abr_to_device_many(r, views.data(), 2, cpu, nullptr, nullptr, back.data(), nullptr);
           deleted = down0.deleted + down1.deleted;  // the walk checks the failing call's sources
           if (status == ABR_OK && deleted != 2) status = ABR_ERR_INTERNAL;
           if (status == ABR_OK) {
             CHECK(std::equal(big.begin(), big.begin() + half, static_cast<float*>(back[0]->dl_tensor.data)));
             CHECK(std::equal(big.begin() + half, big.end(), static_cast<float*>(back[1]->dl_tensor.data)));
           }
         }
         delete_results(status, out, back);
         return status;
       }},
      {"small reads from cuda on a new stream, straight into page-locked results",
       [&](abr_runtime* r, int& deleted) {
         std::vector<std::unique_ptr<Managed>> sources;
         std::vector<DLManagedTensorVersioned*> pointers, out(4, nullptr), back(4, nullptr);
         for (int i = 0; i < 4; ++i)
           sources.push_back(std::make_unique<Managed>(data.data() + i * 64, f32, std::vector<int64_t>{64}));
         for (auto& source : sources) pointers.push_back(&source->managed);
         abr_status status = abr_to_device_many(r, pointers.data(), 4, cuda0, nullptr, nullptr, out.data(), nullptr);
         deleted = 0;
         for (auto& source : sources) deleted += source->deleted;
         if (status == ABR_OK && deleted != 4) status = ABR_ERR_INTERNAL;
         abr_stream* stream = nullptr;
         if (status == ABR_OK) status = abr_stream_create(r, cuda0, &stream);
         if (status == ABR_OK) {  // views of those results, whose deleters are counted
           std::vector<std::unique_ptr<Managed>> views;
           std::vector<DLManagedTensorVersioned*> view_pointers;
           for (int i = 0; i < 4; ++i) {
             views.push_back(std::make_unique<Managed>(out[i]->dl_tensor.data, f32, std::vector<int64_t>{64},
                                                       std::vector<int64_t>{}, 0, cuda0));
             view_pointers.push_back(&views.back()->managed);
           }
           abr_batch_report report = ABR_BATCH_REPORT_INIT;
           status = abr_to_device_many(r, view_pointers.data(), 4, cpu, nullptr, stream, back.data(), &report);
           if (status == ABR_OK && abr_stream_synchronize(stream) != ABR_OK) status = ABR_ERR_INTERNAL;
           deleted = 0;  // the walk checks the failing call's sources
           for (auto& view : views) deleted += view->deleted;
           if (status == ABR_OK && deleted != 4) status = ABR_ERR_INTERNAL;
           for (int i = 0; i < 4 && status == ABR_OK; ++i)
             CHECK(std::equal(data.begin() + i * 64, data.begin() + (i + 1) * 64,
                              static_cast<float*>(back[i]->dl_tensor.data)));
         }
         abr_stream_destroy(stream);
         delete_results(status, out, back);
         return status;
       }},
      {"a batch to cuda on a new stream",
       [&](abr_runtime* r, int& deleted) {
         std::vector<std::unique_ptr<Managed>> sources;
         std::vector<DLManagedTensorVersioned*> pointers, out(4, nullptr);
         for (int i = 0; i < 3; ++i)
           sources.push_back(std::make_unique<Managed>(data.data() + i * 64, f32, std::vector<int64_t>{64}));
         sources.push_back(std::make_unique<Managed>(big.data(), f32, std::vector<int64_t>{rows, cols}));
         for (auto& source : sources) pointers.push_back(&source->managed);
         abr_stream* stream = nullptr;
         abr_status status = abr_stream_create(r, cuda0, &stream);
         if (status == ABR_OK)
           status = abr_to_device_many(r, pointers.data(), 4, cuda0, nullptr, stream, out.data(), nullptr);
         abr_stream_destroy(stream);
         deleted = 0;
         for (auto& source : sources) deleted += source->deleted;
         if (status == ABR_OK && deleted != 4) status = ABR_ERR_INTERNAL;  // the stream released every source
         for (DLManagedTensorVersioned* t : out)
           if (t) t->deleter(t);
         return status;
       }},
      {"host -> cuda on a new stream, an event recorded, the stream released without a wait",
       [&](abr_runtime* r, int& deleted) {
         Managed src(data.data(), f32, {64, 48});
         abr_stream* stream = nullptr;
         abr_status status = abr_stream_create(r, cuda0, &stream);
         abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
         options.copy = ABR_COPY_ALWAYS;
         DLManagedTensorVersioned* out = nullptr;
         abr_event* done = nullptr;
         if (status == ABR_OK) status = abr_to_device(r, &src.managed, cuda0, &options, stream, &out);
         if (status == ABR_OK && abr_event_record(stream, &done) != ABR_OK) {  // a clean refusal, nothing made
           CHECK(done == nullptr);
           CHECK(error_mentions("injected fault"));
         }
         if (done)
           abr_stream_release(stream);  // the work goes on; the runtime keeps the source
         else
           abr_stream_destroy(stream);
         if (done) {
           CHECK(abr_event_synchronize(done) == ABR_OK);
           abr_event_destroy(done);
         }
         if (out) {
           std::vector<float> back(data.size());
           Managed into(back.data(), f32, {64, 48});
           if (abr_copy(r, &out->dl_tensor, &into.tensor(), nullptr, nullptr) == ABR_OK)  // a later call: the
             CHECK(back == data);  // released stream's source, its work done, is let go of here
           out->deleter(out);
         }
         deleted = src.deleted;
         if (status == ABR_OK && deleted != 1) status = ABR_ERR_INTERNAL;
         return status;
       }},
  };
  walk_faults(rt, scenarios);
}
#endif

// Host memory running out at each allocation of one transfer in turn (as test_batch
// walks batches; tests/support/failing_new.cpp): ABR_ERR_OUT_OF_MEMORY with no result and
// the source still the caller's, or a whole success where only the report's words
// failed. Under ASan nothing leaks. Small and staged, up and down, a page-locked
// result, a device copy; each with its report asked for.
TEST_CASE_FIXTURE(NoDriverFindings, "one transfer: out of memory at any allocation leaves the source the caller's") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  const std::vector<int32_t> small = iota(1024, 3), large = iota(std::size_t{5} << 20, 5);  // 4 KiB, 20 MiB (staged)
  struct Case {
    const char* name;
    const std::vector<int32_t>* data;
    DLDevice from, to;
    abr_copy_mode copy;
  };
  const Case cases[] = {{"4 KiB host -> cuda:0", &small, cpu, cuda0, ABR_COPY_IF_NEEDED},
                        {"20 MiB host -> cuda:0", &large, cpu, cuda0, ABR_COPY_IF_NEEDED},
                        {"4 KiB cuda:0 -> host", &small, cuda0, cpu, ABR_COPY_IF_NEEDED},
                        {"20 MiB cuda:0 -> host", &large, cuda0, cpu, ABR_COPY_IF_NEEDED},
                        {"4 KiB cuda:0 -> cuda_host", &small, cuda0, cuda_host, ABR_COPY_IF_NEEDED},
                        {"4 KiB cuda:0 -> cuda:0, a copy", &small, cuda0, cuda0, ABR_COPY_ALWAYS}};
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const int64_t n = static_cast<int64_t>(c.data->size());
    int failures = 0;
    for (long after = 0; after < 100000; ++after) {
      CAPTURE(after);
      Managed host(const_cast<int32_t*>(c.data->data()), i32, {n});
      Owned on_device(c.from.device_type == kDLCUDA ? move_to(rt, &host.managed, c.from) : nullptr);
      DLManagedTensorVersioned* src = on_device.t ? on_device.t : &host.managed;
      const int deleted_before = host.deleted;
      abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
      abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
      options.copy = c.copy;
      options.report = &report;
      DLManagedTensorVersioned* out = nullptr;
      abr_status status = ABR_OK;
      bool failed = false;
      {
        FailingNew failing(after);
        status = abr_to_device(rt, src, c.to, &options, nullptr, &out);
        failed = failing.failed();
      }
      if (status == ABR_OK) {
        if (on_device.t) on_device.t = nullptr;  // taken
        CHECK(read_back(rt, out->dl_tensor) == *c.data);
        out->deleter(out);
        if (!failed) break;  // every allocation walked
        continue;
      }
      REQUIRE_MESSAGE(status == ABR_ERR_OUT_OF_MEMORY, std::string(abr_last_error()));
      CHECK(out == nullptr);
      CHECK(host.deleted == deleted_before);                         // a host source is still the caller's
      if (on_device.t) CHECK(read_back(rt, *on_device) == *c.data);  // and so is a device one, intact
      ++failures;
    }
    CHECK(failures > 0);
  }
}

// Last: a sticky error ends the device for the rest of the process.
TEST_CASE_FIXTURE(NoDriverFindings, "CUDA sticky error: the device is lost, later calls fail fast, teardown survives") {
  Fake fake;
  if (!fake) return;
  CollectedWarnings warnings;  // outlives the runtime, whose teardown meets the lost device too
  Runtime rt;
  const int n = cuda_devices(rt);
  if (n == 0) return;
  std::vector<int32_t> data = iota(64);
  Managed good(data.data(), i32, {64});
  Owned device(move_to(rt, &good.managed, cuda0));

  fake.control("fault_launch", 1);
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.dtype = f64;  // a cast on the device: a kernel launch, which faults
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, device.t, cuda0, &options, nullptr, &out) == ABR_ERR_DEVICE_LOST);
  CHECK(error_mentions("CUDA_ERROR_ILLEGAL_ADDRESS"));
  CHECK(out == nullptr);  // and `device` is still ours

  Managed later(data.data(), i32, {64});
  CHECK(abr_to_device(rt, &later.managed, cuda0, nullptr, nullptr, &out) == ABR_ERR_DEVICE_LOST);
  CHECK(error_mentions("lost"));
  CHECK(later.deleted == 0);
  int32_t count = 0;
  abr_device_count(rt, &count);
  bool flagged = false;
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    abr_device_info(rt, i, &info);
    if (info.device.device_type == kDLCUDA && info.device.device_id == 0)
      flagged = (info.flags & ABR_DEVICE_LOST_FLAG) != 0;
  }
  CHECK(flagged);
  CHECK(warnings.seen("cuda:0 is lost"));
  device.reset();  // deleting memory of a lost device must not hang or abort
  fake.control("reset", 0);
}

// On a stream, a new CPU tensor copied from cuda:0 is made in page-locked memory
// from the pool, and one queued DMA fills it: the call returns before the bytes
// arrive, as torch's .to("cpu", non_blocking=True) does. Without a stream the
// result is plain host memory, filled before the call returns.
TEST_CASE_FIXTURE(NoDriverFindings, "to_device cuda:0 -> cpu on a stream: page-locked memory, filled by a queued DMA") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0) return;
  const std::size_t n = std::size_t{1} << 20;  // 4 MiB
  std::vector<int32_t> data = iota(n, 9);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned on_device(move_to(rt, &source.managed, cuda0));
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  const uint64_t in_use = pool_stats(rt).bytes_in_use;
  const long long pageable = fake ? fake.stat("pageable_async_copies") : 0;
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_ALWAYS;
  options.report = &report;
  DLManagedTensorVersioned* out = nullptr;
  {
    Lag lag(100000);  // 0.1 s per stream operation on the fake
    Managed view(on_device->data, i32, {static_cast<int64_t>(n)}, {}, 0, cuda0);
    REQUIRE_MESSAGE(abr_to_device(rt, &view.managed, cpu, &options, stream, &out) == ABR_OK,
                    std::string(abr_last_error()));
    CHECK(out->dl_tensor.device.device_type == kDLCPU);
    CHECK(report.path == ABR_PATH_DEVICE_TO_HOST);
    CHECK(std::string(report.detail).find("one DMA into page-locked memory") != std::string::npos);
    CHECK(pool_stats(rt).bytes_in_use >= in_use + n * 4);             // the pool's page-locked memory
    if (fake) CHECK(fake.stat("pageable_async_copies") == pageable);  // (Python's test reads it early)
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  const auto* values = static_cast<const int32_t*>(out->dl_tensor.data);
  CHECK(std::equal(values, values + n, data.begin()));
  out->deleter(out);
  abr_stream_destroy(stream);

  // Without a stream: plain host memory, the call waits.
  Managed again(on_device->data, i32, {static_cast<int64_t>(n)}, {}, 0, cuda0);
  REQUIRE(abr_to_device(rt, &again.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK(std::string(report.detail).find("page-locked") == std::string::npos);
  values = static_cast<const int32_t*>(out->dl_tensor.data);
  CHECK(std::equal(values, values + n, data.begin()));
  out->deleter(out);

  // Results take at most half the pool's limit, the rest staying for staging: past
  // it, on a stream too, plain host memory (and the report says so).
  // The first result's block comes back once the device's work before its delete is done.
  REQUIRE(wait_until([&] { return pool_stats(rt).bytes_in_use == 0; }));
  REQUIRE(abr_pool_set_limit(rt, 6 * n * 4) == ABR_OK);  // 24 MiB: results may take 12
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  std::vector<DLManagedTensorVersioned*> held;
  std::deque<Managed> views;     // each kept by the stream until its work is done
  for (int i = 0; i < 4; ++i) {  // 4 MiB each: three fit in 12 MiB, the fourth does not
    Managed& another = views.emplace_back(on_device->data, i32, std::vector<int64_t>{static_cast<int64_t>(n)},
                                          std::vector<int64_t>{}, 0, cuda0);
    REQUIRE(abr_to_device(rt, &another.managed, cpu, &options, stream, &out) == ABR_OK);
    CHECK((std::string(report.detail).find("page-locked") != std::string::npos) == (i < 3));
    held.push_back(out);
  }
  REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  for (DLManagedTensorVersioned* t : held) {
    values = static_cast<const int32_t*>(t->dl_tensor.data);
    CHECK(std::equal(values, values + n, data.begin()));
    t->deleter(t);
  }
  abr_stream_destroy(stream);
  REQUIRE(abr_pool_set_limit(rt, 0) == ABR_OK);
}

// A deleted cuda_host tensor's block goes back to the pool after the devices' queued
// work (the reclaimer's barrier). A new one asked for meanwhile at the pool's limit
// waits for it instead of failing, as device memory does.
TEST_CASE_FIXTURE(NoDriverFindings, "cuda_host at the pool's limit waits for deleted blocks on their way back") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  const std::size_t n = std::size_t{3} << 20;  // 12 MiB of int32
  std::vector<int32_t> data = iota(n, 4);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned on_device(move_to(rt, &source.managed, cuda0));
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  REQUIRE(abr_pool_set_limit(rt, 16 << 20) == ABR_OK);  // room for one 12 MiB block, not two
  Managed first(data.data(), i32, {static_cast<int64_t>(n)});
  Owned pinned(move_to(rt, &first.managed, cuda_host));
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  {
    Lag lag(300000);  // the device's queued work takes 0.3 s
    std::vector<int32_t> zeros(n, 0);
    Managed busy(zeros.data(), i32, {static_cast<int64_t>(n)});
    REQUIRE(abr_copy(rt, &busy.tensor(), &on_device.t->dl_tensor, nullptr, stream) == ABR_OK);
    pinned.reset();  // its block waits for that work before it goes back
    Managed second(data.data(), i32, {static_cast<int64_t>(n)});
    DLManagedTensorVersioned* again = nullptr;
    const abr_status status = abr_to_device(rt, &second.managed, cuda_host, nullptr, nullptr, &again);
    INFO(std::string(abr_last_error()));
    REQUIRE(status == ABR_OK);
    CHECK(std::memcmp(again->dl_tensor.data, data.data(), n * 4) == 0);
    again->deleter(again);
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  abr_stream_destroy(stream);
  REQUIRE(abr_pool_set_limit(rt, 0) == ABR_OK);
}

// The same for staging: a pageable copy at the pool's limit whose chunks need the
// room of a deleted cuda_host tensor's block waits for it to come back instead of
// failing (the pool waits for what CUDA's reclaimer returns: PinnedPool::add_returning).
TEST_CASE_FIXTURE(NoDriverFindings, "staging at the pool's limit waits for deleted blocks on their way back") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  const std::size_t n = std::size_t{6} << 20;  // 24 MiB of int32: three 8 MiB chunks when staged
  std::vector<int32_t> data = iota(n, 4);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned target(move_to(rt, &source.managed, cuda0));
  std::vector<int32_t> few(16, 7);
  Managed small(few.data(), i32, {16});
  Owned busy_source(move_to(rt, &small.managed, cuda0));
  Managed small_too(few.data(), i32, {16});
  Owned busy_target(move_to(rt, &small_too.managed, cuda0));  // a copy between the two keeps the stream busy
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
  REQUIRE(abr_pool_set_limit(rt, 32 << 20) == ABR_OK);  // the 24 MiB block and one chunk, not two
  Managed first(data.data(), i32, {static_cast<int64_t>(n)});
  Owned pinned(move_to(rt, &first.managed, cuda_host));
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  {
    Lag lag(300000);  // the device's queued work takes 0.3 s
    REQUIRE(abr_copy(rt, &busy_source.t->dl_tensor, &busy_target.t->dl_tensor, nullptr, stream) == ABR_OK);
    pinned.reset();  // its block waits for that work before it goes back
    std::vector<int32_t> host(n, 0);
    Managed back(host.data(), i32, {static_cast<int64_t>(n)});
    abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    options.report = &report;
    Managed staged(data.data(), i32, {static_cast<int64_t>(n)});
    const abr_status status = abr_copy(rt, &staged.tensor(), &target.t->dl_tensor, &options, nullptr);
    INFO(std::string(abr_last_error()));
    REQUIRE(status == ABR_OK);
    INFO(report.detail);
    CHECK(std::string(report.detail).find("chunk") != std::string::npos);  // staged, not one driver copy
    REQUIRE(abr_copy(rt, &target.t->dl_tensor, &back.tensor(), nullptr, nullptr) == ABR_OK);
    CHECK(host == data);
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  }
  abr_stream_destroy(stream);
  REQUIRE(abr_pool_set_limit(rt, 0) == ABR_OK);
}

// The pool may refuse a page-locked result its budget allowed (another thread took
// the room since, or the driver has none): the transfer is planned again for plain
// host memory, without the pool's blocks (it would most likely refuse staging too),
// so that it runs and reports the driver's own copy. Before, the plan stayed "one
// DMA into page-locked memory", into memory that was not.
TEST_CASE_FIXTURE(NoDriverFindings,
                  "to_device cuda:0 -> cpu on a stream: a refused page-locked result is planned again") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  const std::size_t n = std::size_t{8} << 20;  // 32 MiB: four 8 MiB chunks when staged
  std::vector<int32_t> data = iota(n, 3);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned on_device(move_to(rt, &source.managed, cuda0));
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);  // nothing cached: a trim cannot make room
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = ABR_COPY_ALWAYS;
  options.report = &report;
  fake.control("fail_alloc", 1);  // the result's cuMemHostAlloc
  Managed view(on_device->data, i32, {static_cast<int64_t>(n)}, {}, 0, cuda0);
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE_MESSAGE(abr_to_device(rt, &view.managed, cpu, &options, stream, &out) == ABR_OK,
                  std::string(abr_last_error()));
  fake.control("fail_alloc", 0);
  INFO(report.detail);
  CHECK(report.path == ABR_PATH_DEVICE_TO_HOST);
  CHECK(std::string(report.detail).find("page-locked") == std::string::npos);
  CHECK(std::string(report.detail).find("one driver copy, the pinned pool having refused") != std::string::npos);
  CHECK(pool_stats(rt).bytes_pinned == 0);  // no staging block either
  REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  const auto* values = static_cast<const int32_t*>(out->dl_tensor.data);
  CHECK(std::equal(values, values + n, data.begin()));
  out->deleter(out);
  abr_stream_destroy(stream);
}
