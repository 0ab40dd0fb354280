// abr_to_device_many on the CPU and PoCL: every result's values, the coalesced
// block shared by the small results, views that keep their sources, all or
// nothing on failure (no source consumed, no result handed out), and the batch's
// report.
#include <cstddef>
#include <cstring>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "tests/support/fault_walk.hpp"
#include "tests/support/opencl_helpers.hpp"

using namespace test;

namespace {

// Sources over host vectors of float32, 1, 2, 3, ... per tensor.
struct Sources {
  std::vector<std::vector<float>> data;
  std::vector<std::unique_ptr<Managed>> tensors;
  std::vector<DLManagedTensorVersioned*> pointers;

  void add(std::size_t elements, float first) {
    data.emplace_back(elements);
    std::iota(data.back().begin(), data.back().end(), first);
    tensors.push_back(
        std::make_unique<Managed>(data.back().data(), f32, std::vector<int64_t>{static_cast<int64_t>(elements)}));
    pointers.push_back(&tensors.back()->managed);
  }
  int deleted() const {
    int sum = 0;
    for (const auto& t : tensors) sum += t->deleted;
    return sum;
  }
};

struct Results {
  std::vector<DLManagedTensorVersioned*> out;
  explicit Results(std::size_t n) : out(n, nullptr) {}
  ~Results() {
    for (DLManagedTensorVersioned* t : out)
      if (t) t->deleter(t);
  }
};

abr_status many(abr_runtime* rt, Sources& sources, Results& results, DLDevice device, abr_copy_mode copy,
                abr_batch_report* report = nullptr, abr_stream* stream = nullptr, DLDataType dtype = {}) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = copy;
  options.dtype = dtype;
  return abr_to_device_many(rt, sources.pointers.data(), sources.pointers.size(), device, &options, stream,
                            results.out.data(), report);
}

template <class T>
std::vector<T> read_back(abr_runtime* rt, const DLTensor& tensor) {
  std::vector<T> out(static_cast<std::size_t>(tensor.shape[0]));
  Managed landing(out.data(), tensor.dtype, {tensor.shape[0]});
  REQUIRE_MESSAGE(abr_copy(rt, &tensor, &landing.tensor(), nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
  return out;
}

}  // namespace

TEST_CASE("batch: 256 small copies to PoCL share one buffer, each with its own values") {
  Runtime rt;
  Sources sources;
  for (int i = 0; i < 256; ++i) sources.add(1024, static_cast<float>(i * 1000));  // 4 KiB each
  Results results(256);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(many(rt, sources, results, ocl0, ABR_COPY_ALWAYS, &report) == ABR_OK, std::string(abr_last_error()));
  CHECK(sources.deleted() == 256);  // copied: every source released
  CHECK(report.tensors == 256);
  CHECK(report.coalesced == 256);
  CHECK(report.copies == 1);
  CHECK(report.views == 0);
  CHECK(report.bytes_moved == 256u * 4096);
  CHECK(std::string(report.detail) ==
        "256 of 256 tensors packed into one 1048576 byte block, through one mapping of the device's memory; 0 "
        "view(s), 0 other copy(ies)");
  for (int i = 0; i < 256; ++i) {
    const DLTensor& t = results.out[i]->dl_tensor;
    CHECK((t.device.device_type == kDLOpenCL && t.ndim == 1 && t.shape[0] == 1024));
    CHECK(t.data == results.out[0]->dl_tensor.data);  // one cl_mem
    CHECK(t.byte_offset == static_cast<uint64_t>(i) * 4096);
    CHECK((results.out[i]->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0);
  }
  // The buffer lives until the last result goes.
  for (int i = 0; i < 255; ++i) {
    results.out[i]->deleter(results.out[i]);
    results.out[i] = nullptr;
  }
  CHECK(read_back<float>(rt, results.out[255]->dl_tensor) == sources.data[255]);
}

TEST_CASE("batch: small copies into host memory share one block that outlives the others; a large one its own") {
  Runtime rt;
  Sources sources;
  for (int i = 0; i < 16; ++i) sources.add(1024, static_cast<float>(i * 1000));  // 4 KiB each
  sources.add((std::size_t{1} << 20) / 4, 5.0f);                                 // 1 MiB: a buffer of its own
  Results results(17);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(many(rt, sources, results, cpu, ABR_COPY_ALWAYS, &report) == ABR_OK, std::string(abr_last_error()));
  CHECK(sources.deleted() == 17);
  CHECK(report.coalesced == 16);
  CHECK(report.copies == 2);
  CHECK(report.bytes_moved == 16u * 4096 + (1u << 20));
  CHECK(std::string(report.detail) ==
        "16 of 17 tensors packed into one 65536 byte block; 0 view(s), 1 other copy(ies)");
  const auto* block = static_cast<const char*>(results.out[0]->dl_tensor.data);
  for (int i = 0; i < 16; ++i) {
    const DLTensor& t = results.out[i]->dl_tensor;
    CHECK(static_cast<const char*>(t.data) == block + i * 4096);  // slots of one block, 256-byte aligned
    CHECK(reinterpret_cast<uintptr_t>(t.data) % 256 == 0);
    CHECK(t.byte_offset == 0);
    CHECK((results.out[i]->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0);
    CHECK(std::memcmp(t.data, sources.data[i].data(), 4096) == 0);
  }
  const DLTensor& large = results.out[16]->dl_tensor;
  CHECK((static_cast<const char*>(large.data) < block || static_cast<const char*>(large.data) >= block + 16 * 4096));
  CHECK(std::memcmp(large.data, sources.data[16].data(), 1u << 20) == 0);
  // The block lives until the last of its results goes (ASan would see a use after free).
  for (int i = 0; i < 15; ++i) {
    results.out[i]->deleter(results.out[i]);
    results.out[i] = nullptr;
  }
  CHECK(std::memcmp(results.out[15]->dl_tensor.data, sources.data[15].data(), 4096) == 0);
}

TEST_CASE("batch: a block of several MiB is packed on several threads, each source into its own slot") {
  Runtime rt;
  REQUIRE(abr_runtime_set_staging(rt, 4, 0) == ABR_OK);
  for (const DLDevice device : {cpu, ocl0}) {
    for (const DLDataType dtype : {DLDataType{}, f64}) {  // bytes for bytes, and a cast (the host engine's walk)
      CAPTURE(device.device_type);
      CAPTURE(int(dtype.bits));
      Sources sources;  // 1200 x 4 KiB: 4.7 MiB, four pieces of a memcpy
      for (int i = 0; i < 1200; ++i) sources.add(1024, static_cast<float>(i * 1024));
      Results results(sources.pointers.size());
      abr_batch_report report = ABR_BATCH_REPORT_INIT;
      REQUIRE_MESSAGE(many(rt, sources, results, device, ABR_COPY_ALWAYS, &report, nullptr, dtype) == ABR_OK,
                      abr_last_error());
      CHECK(report.coalesced == 1200);
      CHECK(std::string(report.detail).find("packed into one") != std::string::npos);
      CHECK(std::string(report.detail).find(" on 4 threads") != std::string::npos);
      bool all_right = true;  // one CHECK for 1200 tensors
      for (std::size_t i = 0; i < results.out.size(); ++i) {
        const DLTensor& t = results.out[i]->dl_tensor;
        if (dtype.bits == 64) {
          const std::vector<double> back = read_back<double>(rt, t);
          all_right &= std::equal(back.begin(), back.end(), sources.data[i].begin());
        } else {
          all_right &= read_back<float>(rt, t) == sources.data[i];
        }
      }
      CHECK(all_right);
      CHECK(sources.deleted() == 1200);  // copied: every source released once
    }
  }
}

TEST_CASE("batch: to PoCL, small tensors coalesced, a large one on its own, a cast for all") {
  Runtime rt;
  Sources sources;
  for (int i = 0; i < 8; ++i) sources.add(100 + i, static_cast<float>(i) * 0.5f);  // odd sizes: slots are aligned
  sources.add((std::size_t{3} << 20) / 4, 7.0f);                                   // 3 MiB: not coalesced
  Results results(9);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(many(rt, sources, results, ocl0, ABR_COPY_ALWAYS, &report, nullptr, f64) == ABR_OK,
                  std::string(abr_last_error()));
  CHECK(sources.deleted() == 9);
  CHECK(report.coalesced == 8);
  CHECK(report.copies == 2);
  CHECK(report.bytes_moved == (8 * 100 + 28) * 8 + (std::size_t{3} << 20) * 2);
  for (std::size_t i = 0; i < 9; ++i) {
    CAPTURE(i);
    const DLTensor& t = results.out[i]->dl_tensor;
    CHECK((t.device.device_type == kDLOpenCL && t.dtype.bits == 64));
    const std::vector<double> values = read_back<double>(rt, t);
    CHECK(std::equal(values.begin(), values.end(), sources.data[i].begin()));
  }
  // The coalesced results are offsets into one cl_mem, 256-byte aligned.
  for (std::size_t i = 1; i < 8; ++i) {
    CHECK(results.out[i]->dl_tensor.data == results.out[0]->dl_tensor.data);
    CHECK(results.out[i]->dl_tensor.byte_offset % 256 == 0);
    CHECK(results.out[i]->dl_tensor.byte_offset > results.out[i - 1]->dl_tensor.byte_offset);
  }
}

TEST_CASE("batch: empty tensors to a device are copies of nothing, not a block of nothing") {
  Runtime rt;
  Sources sources;
  sources.add(0, 0.0f);
  sources.add(0, 0.0f);
  Results results(2);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(many(rt, sources, results, ocl0, ABR_COPY_ALWAYS, &report) == ABR_OK, std::string(abr_last_error()));
  CHECK(report.coalesced == 0);
  CHECK((results.out[0]->dl_tensor.shape[0] == 0 && results.out[1]->dl_tensor.shape[0] == 0));
  CHECK(sources.deleted() == 2);
}

TEST_CASE("batch: views keep their sources until the results go") {
  Runtime rt;
  Sources sources;
  for (int i = 0; i < 4; ++i) sources.add(64, static_cast<float>(i));
  Results results(4);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE(many(rt, sources, results, cpu, ABR_COPY_IF_NEEDED, &report) == ABR_OK);
  CHECK(report.views == 4);
  CHECK(report.copies == 0);
  CHECK(report.bytes_moved == 0);
  CHECK(sources.deleted() == 0);
  for (int i = 0; i < 4; ++i) CHECK(results.out[i]->dl_tensor.data == sources.data[i].data());
  for (DLManagedTensorVersioned*& t : results.out) {
    t->deleter(t);
    t = nullptr;
  }
  CHECK(sources.deleted() == 4);  // each deleter once, through its result
}

TEST_CASE("batch: a version 2 report says each result's path; a version 1 report is filled within its size") {
  Runtime rt;
  Sources sources;
  for (int i = 0; i < 3; ++i) sources.add(32, static_cast<float>(i));
  std::vector<abr_path> paths(3, ABR_PATH_MAX_ENUM);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  report.paths = paths.data();
  {
    Results views(3);
    REQUIRE(many(rt, sources, views, cpu, ABR_COPY_IF_NEEDED, &report) == ABR_OK);
    CHECK(paths == std::vector<abr_path>(3, ABR_PATH_ZERO_COPY));
    CHECK(report.paths == paths.data());  // the caller's array, kept
  }
  Sources more;
  for (int i = 0; i < 3; ++i) more.add(32, static_cast<float>(i));
  Results copies(3);
  REQUIRE(many(rt, more, copies, ocl0, ABR_COPY_ALWAYS, &report) == ABR_OK);
  CHECK(paths == std::vector<abr_path>(3, ABR_PATH_HOST_TO_DEVICE));
  // A failed call leaves the paths as they were.
  Sources bad;
  bad.add(4, 0.0f);
  bad.tensors[0]->managed.dl_tensor.ndim = -1;
  Results none(1);
  paths[0] = ABR_PATH_MAX_ENUM;
  CHECK(many(rt, bad, none, cpu, ABR_COPY_ALWAYS, &report) == ABR_ERR_DLPACK_NDIM);
  CHECK(paths[0] == ABR_PATH_MAX_ENUM);
  // An empty batch writes no path and hands the caller's array back (it was set to NULL).
  REQUIRE(abr_to_device_many(rt, nullptr, 0, cpu, nullptr, nullptr, nullptr, &report) == ABR_OK);
  CHECK(report.paths == paths.data());
  CHECK(paths[0] == ABR_PATH_MAX_ENUM);
  // A caller built against version 1: a struct without `paths`, exactly its size on
  // the heap (ASan sees a byte too many), filled as before.
  const std::size_t v1_size = offsetof(abr_batch_report, paths);
  std::unique_ptr<unsigned char[]> v1(new unsigned char[v1_size]);
  auto* old = reinterpret_cast<abr_batch_report*>(v1.get());
  REQUIRE(abr_batch_report_init(old, 1) == ABR_OK);
  Sources third;
  for (int i = 0; i < 2; ++i) third.add(8, 1.0f);
  Results results(2);
  REQUIRE(many(rt, third, results, cpu, ABR_COPY_IF_NEEDED, old) == ABR_OK);
  CHECK(old->version == 1);
  CHECK(old->views == 2);
}

TEST_CASE("batch: a version 3 report says each result's flags as its own report would; version 2 within its size") {
  Runtime rt;
  Sources sources;
  for (int i = 0; i < 3; ++i) sources.add(32, static_cast<float>(i));
  // The second source views every other element of its data: packed on the way.
  sources.tensors[1] =
      std::make_unique<Managed>(sources.data[1].data(), f32, std::vector<int64_t>{16}, std::vector<int64_t>{2});
  sources.pointers[1] = &sources.tensors[1]->managed;
  std::vector<abr_path> paths(3, ABR_PATH_MAX_ENUM);
  std::vector<uint32_t> flags(3, 0xFFu);
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  report.paths = paths.data();
  report.result_flags = flags.data();
  {
    Results cast(3);
    REQUIRE_MESSAGE(many(rt, sources, cast, ocl0, ABR_COPY_ALWAYS, &report, nullptr, f64) == ABR_OK,
                    std::string(abr_last_error()));
    CHECK(flags == std::vector<uint32_t>{ABR_REPORT_CAST, ABR_REPORT_CAST | ABR_REPORT_PACKED, ABR_REPORT_CAST});
    CHECK(report.result_flags == flags.data());  // the caller's array, kept
    CHECK(read_back<double>(rt, cast.out[1]->dl_tensor)[15] == 31.0);
  }
  Sources views;
  for (int i = 0; i < 3; ++i) views.add(8, 1.0f);
  Results same(3);
  REQUIRE(many(rt, views, same, cpu, ABR_COPY_IF_NEEDED, &report) == ABR_OK);
  CHECK(flags == std::vector<uint32_t>(3, 0u));
  // abr_copy_many: each pair's flags; a failed call leaves them as they were.
  std::vector<float> a(8, 2.0f);
  std::vector<double> wide(8), every_other(16);
  Managed from(a.data(), f32, {8}), into(wide.data(), f64, {8}), half(a.data(), f32, {4}, {2}),
      strided_into(every_other.data(), f64, {4}, {4});
  const DLTensor* srcs[] = {&from.tensor(), &half.tensor()};
  const DLTensor* dsts[] = {&into.tensor(), &strided_into.tensor()};
  REQUIRE_MESSAGE(abr_copy_many(rt, srcs, dsts, 2, nullptr, nullptr, &report) == ABR_OK, std::string(abr_last_error()));
  CHECK(flags[0] == ABR_REPORT_CAST);
  CHECK(flags[1] == (ABR_REPORT_CAST | ABR_REPORT_PACKED));
  CHECK(every_other[4] == 2.0);
  flags[0] = 0xFFu;
  const DLTensor* mismatched[] = {&from.tensor(), &from.tensor()};
  CHECK(abr_copy_many(rt, mismatched, dsts, 2, nullptr, nullptr, &report) == ABR_ERR_SHAPE_MISMATCH);
  CHECK(flags[0] == 0xFFu);
  // A caller built against version 2: a struct without `result_flags`, exactly its size on the heap.
  const std::size_t v2_size = offsetof(abr_batch_report, result_flags);
  std::unique_ptr<unsigned char[]> v2(new unsigned char[v2_size]);
  auto* old = reinterpret_cast<abr_batch_report*>(v2.get());
  REQUIRE(abr_batch_report_init(old, 2) == ABR_OK);
  old->paths = paths.data();
  Sources third;
  for (int i = 0; i < 2; ++i) third.add(8, 1.0f);
  Results results(2);
  REQUIRE(many(rt, third, results, ocl0, ABR_COPY_ALWAYS, old) == ABR_OK);
  CHECK(old->version == 2);
  CHECK(paths[0] == ABR_PATH_HOST_TO_DEVICE);
}

TEST_CASE("batch: on PoCL a stream holds the sources until its work is done") {
  Runtime rt;
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, ocl0, &stream) == ABR_OK);
  Sources sources;
  for (int i = 0; i < 16; ++i) sources.add(256, static_cast<float>(i * 10));
  {
    Results results(16);
    REQUIRE_MESSAGE(many(rt, sources, results, ocl0, ABR_COPY_ALWAYS, nullptr, stream) == ABR_OK,
                    std::string(abr_last_error()));
    REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
    for (std::size_t i = 0; i < 16; ++i) CHECK(read_back<float>(rt, results.out[i]->dl_tensor) == sources.data[i]);
  }
  abr_stream_destroy(stream);
  CHECK(sources.deleted() == 16);
}

TEST_CASE("batch: a bad source, a repeated one or a NULL one fails the whole call and consumes nothing") {
  Runtime rt;
  Sources sources;
  for (int i = 0; i < 5; ++i) sources.add(16, 0.0f);
  sources.tensors[3]->managed.dl_tensor.ndim = -1;
  Results results(5);
  CHECK(many(rt, sources, results, cpu, ABR_COPY_ALWAYS) == ABR_ERR_DLPACK_NDIM);
  CHECK(std::string(abr_last_error()).rfind("abr_to_device_many: srcs[3]: ", 0) == 0);
  sources.tensors[3]->managed.dl_tensor.ndim = 1;
  sources.pointers[4] = sources.pointers[1];
  CHECK(many(rt, sources, results, cpu, ABR_COPY_ALWAYS) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()) ==
        "abr_to_device_many: srcs[1] and srcs[4] are the same tensor; each source is consumed once");
  sources.pointers[4] = nullptr;
  CHECK(many(rt, sources, results, cpu, ABR_COPY_ALWAYS) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()) == "abr_to_device_many: srcs[4] is NULL");
  CHECK(sources.deleted() == 0);
  for (DLManagedTensorVersioned* t : results.out) CHECK(t == nullptr);
  // A device the runtime lacks: nothing planned, nothing consumed.
  sources.pointers[4] = &sources.tensors[4]->managed;
  CHECK(many(rt, sources, results, DLDevice{kDLOpenCL, 99}, ABR_COPY_ALWAYS) == ABR_ERR_NO_DEVICE);
  CHECK(sources.deleted() == 0);
  // Nothing to move is a success.
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  CHECK(abr_to_device_many(rt, nullptr, 0, cpu, nullptr, nullptr, nullptr, &report) == ABR_OK);
  CHECK(report.tensors == 0);
  abr_batch_report unset{};
  CHECK(abr_to_device_many(rt, nullptr, 0, cpu, nullptr, nullptr, nullptr, &unset) == ABR_ERR_INVALID_ARGUMENT);
}

// A garbage count (a negative one through an FFI, made unsigned) was refused only after
// every out[i] up to it was cleared: a write past the caller's array until it crashed.
TEST_CASE("batch: a count past the limit is refused before anything of out is written") {
  Runtime rt;
  Sources sources;
  sources.add(16, 0.0f);
  DLManagedTensorVersioned* sentinel = &sources.tensors[0]->managed;
  DLManagedTensorVersioned* out[1] = {sentinel};
  const std::size_t garbage = static_cast<std::size_t>(-1);
  CHECK(abr_to_device_many(rt, sources.pointers.data(), garbage, cpu, nullptr, nullptr, out, nullptr) ==
        ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("at most 16777216 tensors per call") != std::string::npos);
  CHECK(out[0] == sentinel);
  abr_batch_report unknown = ABR_BATCH_REPORT_INIT;  // a failure of a sane count clears out, as the header says
  unknown.version = 99;
  CHECK(abr_to_device_many(rt, sources.pointers.data(), 1, cpu, nullptr, nullptr, out, &unknown) ==
        ABR_ERR_INVALID_ARGUMENT);
  CHECK(out[0] == nullptr);
  const DLTensor* none[1] = {nullptr};
  CHECK(abr_copy_many(rt, none, none, garbage, nullptr, nullptr, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("at most 16777216 pairs per call") != std::string::npos);
  CHECK(sources.deleted() == 0);
}

#ifdef ABR_FAULT_INJECTION
TEST_CASE("batch: every injected failure leaves every source the caller's and leaks nothing") {
  Runtime rt;
  StagingChunkMib chunks("1");
  const auto batch = [](DLDevice device, DLDataType dtype) {
    return [device, dtype](abr_runtime* r, int& deleted) {
      Sources sources;
      for (int i = 0; i < 6; ++i) sources.add(300, static_cast<float>(i));
      sources.add((std::size_t{5} << 20) / 8, 1.0f);  // 2.5 MiB: staged in chunks to OpenCL
      Results results(sources.pointers.size());
      const abr_status status = many(r, sources, results, device, ABR_COPY_ALWAYS, nullptr, nullptr, dtype);
      deleted = sources.deleted();
      if (status == ABR_OK) CHECK(deleted == 7);
      for (DLManagedTensorVersioned* t : results.out) CHECK((status == ABR_OK) == (t != nullptr));
      return status;
    };
  };
  walk_faults(rt, {{"batch to the CPU, cast to f64", batch(cpu, f64)}, {"batch to opencl", batch(ocl0, {})}});
}
#endif

TEST_CASE("copy_many: pairs in order, one wait per context, a later pair sees an earlier one's result") {
  Runtime rt;
  std::vector<float> a(1000), b(1000, 0.0f), c(1000, 0.0f);
  std::iota(a.begin(), a.end(), 1.0f);
  Sources on_device;  // two OpenCL buffers to copy into and out of
  on_device.add(1000, 0.0f);
  on_device.add(1000, 0.0f);
  Results buffers(2);
  REQUIRE(many(rt, on_device, buffers, ocl0, ABR_COPY_ALWAYS) == ABR_OK);
  DLTensor& d1 = buffers.out[0]->dl_tensor;
  DLTensor& d2 = buffers.out[1]->dl_tensor;
  Managed host_a(a.data(), f32, {1000}), host_b(b.data(), f32, {1000}), host_c(c.data(), f32, {1000});
  Managed every_other(b.data(), f32, {500}, {2});  // a strided host destination
  Managed first_half(a.data(), f32, {500});
  // a -> d1 (write), d1 -> d2 (device copy), d2 -> b (read), b -> c (host), a[:500] -> b[::2] (host)
  const DLTensor* srcs[] = {&host_a.tensor(), &d1, &d2, &host_b.tensor(), &first_half.tensor()};
  const DLTensor* dsts[] = {&d1, &d2, &host_b.tensor(), &host_c.tensor(), &every_other.tensor()};
  abr_path paths[5] = {};
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  report.paths = paths;
  REQUIRE_MESSAGE(abr_copy_many(rt, srcs, dsts, 5, nullptr, nullptr, &report) == ABR_OK, std::string(abr_last_error()));
  CHECK(c == a);  // through both device buffers, in order
  CHECK(std::vector<abr_path>(paths, paths + 5) ==
        std::vector<abr_path>{ABR_PATH_HOST_TO_DEVICE, ABR_PATH_DEVICE_COPY, ABR_PATH_DEVICE_TO_HOST,
                              ABR_PATH_HOST_COPY, ABR_PATH_HOST_COPY});
  for (std::size_t i = 0; i < 1000; ++i) CHECK(b[i] == (i % 2 ? a[i] : a[i / 2]));
  CHECK(report.tensors == 5);
  CHECK(report.bytes_moved == 4 * 4000 + 2000);
  CHECK(std::string(report.detail) == "5 copies; the device moves in 1 submission(s)");
}

TEST_CASE("copy_many: a bad pair moves nothing and names its place") {
  Runtime rt;
  std::vector<float> a(16, 1.0f), b(16, 0.0f), c(8, 0.0f);
  Managed src(a.data(), f32, {16}), dst(b.data(), f32, {16}), short_dst(c.data(), f32, {8});
  const DLTensor* srcs[] = {&src.tensor(), &src.tensor()};
  const DLTensor* dsts[] = {&dst.tensor(), &short_dst.tensor()};
  CHECK(abr_copy_many(rt, srcs, dsts, 2, nullptr, nullptr, nullptr) == ABR_ERR_SHAPE_MISMATCH);
  CHECK(std::string(abr_last_error()) == "abr_copy_many: pair 1: source shape [16] differs from destination shape [8]");
  CHECK(b == std::vector<float>(16, 0.0f));  // pair 0 did not run either
  const DLTensor* missing[] = {&src.tensor(), nullptr};
  CHECK(abr_copy_many(rt, srcs, missing, 2, nullptr, nullptr, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()) == "abr_copy_many: pair 1: the destination is NULL");
  CHECK(abr_copy_many(rt, nullptr, nullptr, 0, nullptr, nullptr, nullptr) == ABR_OK);
  // A pair its casting refuses (a copy's default, same_kind: float into int32) moves nothing either.
  std::vector<int32_t> ints(16, 0);
  Managed int_dst(ints.data(), i32, {16});
  const DLTensor* to_ints[] = {&dst.tensor(), &int_dst.tensor()};
  CHECK(abr_copy_many(rt, srcs, to_ints, 2, nullptr, nullptr, nullptr) == ABR_ERR_CASTING);
  CHECK(error_mentions("abr_copy_many: pair 1: casting \"same_kind\""));
  CHECK(b == std::vector<float>(16, 0.0f));
  abr_transfer_options unsafe = ABR_TRANSFER_OPTIONS_INIT;
  unsafe.casting = ABR_CASTING_UNSAFE;
  REQUIRE(abr_copy_many(rt, srcs, to_ints, 2, &unsafe, nullptr, nullptr) == ABR_OK);
  CHECK(ints == std::vector<int32_t>(16, 1));
}

// The reads of one context share a submission and are waited for once (each read
// queued without blocking): every result still holds its own tensor's values.
TEST_CASE("batch: 64 PoCL tensors to the CPU, read with one wait, each with its own values") {
  Runtime rt;
  Sources sources;
  for (int i = 0; i < 64; ++i) sources.add(1024 + static_cast<std::size_t>(i), static_cast<float>(i * 10000));
  Results on_device(64), on_host(64);
  REQUIRE_MESSAGE(many(rt, sources, on_device, ocl0, ABR_COPY_ALWAYS) == ABR_OK, std::string(abr_last_error()));
  abr_batch_report report = ABR_BATCH_REPORT_INIT;
  REQUIRE_MESSAGE(
      abr_to_device_many(rt, on_device.out.data(), 64, cpu, nullptr, nullptr, on_host.out.data(), &report) == ABR_OK,
      abr_last_error());
  std::fill(on_device.out.begin(), on_device.out.end(), nullptr);  // consumed
  CHECK(report.copies == 64);
  for (std::size_t i = 0; i < 64; ++i) {
    CAPTURE(i);
    const DLTensor& t = on_host.out[i]->dl_tensor;
    REQUIRE((t.device.device_type == kDLCPU && t.shape[0] == static_cast<int64_t>(1024 + i)));
    const float* values = static_cast<const float*>(t.data);
    CHECK(std::vector<float>(values, values + t.shape[0]) == sources.data[i]);
  }
}
