// Host memory running out at each allocation of a CPU or PoCL transfer, one at a
// time (tests/support/failing_new.cpp; the CUDA twins are in tests/cuda/): every
// failure is ABR_ERR_OUT_OF_MEMORY with nothing handed out, no source deleted and
// every source's values intact; every success has the values of a run with memory
// to spare. The ASan build runs it too, where nothing may leak.
#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "tests/support/failing_new.hpp"
#include "tests/support/opencl_helpers.hpp"

using namespace test;

namespace {

// A tensor's bytes, read into the host through the runtime (compact, whatever its layout).
std::vector<char> bytes_of(abr_runtime* rt, const DLTensor& tensor) {
  Managed view(
      tensor.data, tensor.dtype, std::vector<int64_t>(tensor.shape, tensor.shape + tensor.ndim),
      tensor.strides ? std::vector<int64_t>(tensor.strides, tensor.strides + tensor.ndim) : std::vector<int64_t>{},
      tensor.byte_offset, tensor.device);
  Owned host(copy_to(rt, &view.managed, cpu, nullptr));
  const std::size_t itemsize = (tensor.dtype.bits * tensor.dtype.lanes + 7) / 8;
  std::size_t n = 1;
  for (int i = 0; i < tensor.ndim; ++i) n *= static_cast<std::size_t>(tensor.shape[i]);
  const char* data = static_cast<const char*>(host->data) + host->byte_offset;
  return std::vector<char>(data, data + n * itemsize);
}

// One run of a transfer under test: its sources (made afresh each run), the call,
// and its results.
struct Run {
  std::vector<std::unique_ptr<Managed>> sources;
  std::vector<DLManagedTensorVersioned*> out;
  std::vector<std::unique_ptr<Managed>> destinations;  // copy_many's (the caller's buffers), else empty
  // What the calls take, made before the walk arms its failure: the test's own
  // allocations must not be the ones that fail.
  std::vector<DLManagedTensorVersioned*> managed;
  std::vector<const DLTensor*> srcs, dsts;
  void prepare() {
    for (const auto& s : sources) {
      managed.push_back(&s->managed);
      srcs.push_back(&s->managed.dl_tensor);
    }
    for (const auto& d : destinations) dsts.push_back(&d->managed.dl_tensor);
    out.assign(destinations.empty() ? sources.size() : 0, nullptr);
  }
  int deleted() const {
    int sum = 0;
    for (const auto& s : sources) sum += s->deleted;
    return sum;
  }
  ~Run() {
    for (DLManagedTensorVersioned* t : out)
      if (t) t->deleter(t);
  }
};

struct Transfer {
  const char* name;
  std::function<void(Run&)> make_sources;  // fills sources (and destinations)
  std::function<abr_status(abr_runtime*, Run&)> call;
};

// What a run leaves to compare: each result's bytes (or each destination's).
std::vector<std::vector<char>> results_of(abr_runtime* rt, Run& run) {
  std::vector<std::vector<char>> all;
  for (DLManagedTensorVersioned* t : run.out) all.push_back(bytes_of(rt, t->dl_tensor));
  for (const auto& d : run.destinations) all.push_back(bytes_of(rt, d->managed.dl_tensor));
  return all;
}

std::vector<std::vector<char>> sources_of(abr_runtime* rt, Run& run) {
  std::vector<std::vector<char>> all;
  for (const auto& s : run.sources) all.push_back(bytes_of(rt, s->managed.dl_tensor));
  return all;
}

struct Walked {
  int failures = 0;   // calls that failed with ABR_ERR_OUT_OF_MEMORY
  int recovered = 0;  // calls that succeeded whole despite a failed allocation
};

// Walks every allocation of `transfer`: the nth from the call's start fails, for
// n = 0, 1, ... until a run reaches no armed allocation.
Walked walk(abr_runtime* rt, const Transfer& transfer) {
  const std::string name = transfer.name;
  CAPTURE(name);
  std::vector<std::vector<char>> expected, sources;
  {
    Run reference;
    transfer.make_sources(reference);
    reference.prepare();
    sources = sources_of(rt, reference);
    REQUIRE_MESSAGE(transfer.call(rt, reference) == ABR_OK, std::string(abr_last_error()));
    expected = results_of(rt, reference);
  }
  Walked walked;
  for (long after = 0; after < 100000; ++after) {
    CAPTURE(after);
    Run run;
    transfer.make_sources(run);
    run.prepare();
    abr_status status = ABR_OK;
    bool failed = false;
    {
      FailingNew failing(after);
      status = transfer.call(rt, run);
      failed = failing.failed();
    }
    if (status == ABR_OK) {
      CHECK(results_of(rt, run) == expected);
      if (!failed) return walked;  // every allocation walked
      ++walked.recovered;          // an allocation with a fallback: a pinned block freed, not cached; a report's words
      continue;
    }
    REQUIRE_MESSAGE(status == ABR_ERR_OUT_OF_MEMORY, std::string(abr_last_error()));
    CHECK(failed);
    CHECK(run.deleted() == 0);  // every source still the caller's
    CHECK(std::all_of(run.out.begin(), run.out.end(), [](DLManagedTensorVersioned* t) { return t == nullptr; }));
    CHECK(sources_of(rt, run) == sources);
    ++walked.failures;
  }
  FAIL("the walk did not end");
  return walked;
}

std::vector<float> counting(std::size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

abr_status to_device(abr_runtime* rt, Run& run, DLDevice to, DLDataType dtype = {}, abr_stream* stream = nullptr) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = ABR_COPY_ALWAYS;
  options.dtype = dtype;
  abr_status status = abr_to_device(rt, run.managed[0], to, &options, stream, &run.out[0]);
  if (stream && abr_stream_synchronize(stream) != ABR_OK) status = ABR_ERR_INTERNAL;
  return status;
}

abr_status to_device_many(abr_runtime* rt, Run& run, DLDevice to, abr_stream* stream = nullptr) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = ABR_COPY_ALWAYS;
  abr_status status =
      abr_to_device_many(rt, run.managed.data(), run.managed.size(), to, &options, stream, run.out.data(), nullptr);
  if (stream && abr_stream_synchronize(stream) != ABR_OK) status = ABR_ERR_INTERNAL;
  return status;
}

}  // namespace

TEST_CASE("out of memory at any allocation of a CPU or PoCL transfer keeps the sources and hands out nothing") {
  Runtime rt;
  ClEnv env;
  const std::vector<float> data = counting(64 * 48, 0.25f), big = counting((std::size_t{5} << 20) / 8, 1);
  const std::vector<std::vector<float>> smalls = [] {
    std::vector<std::vector<float>> v;
    for (int i = 0; i < 64; ++i) v.push_back(counting(1024, static_cast<float>(i) * 10000));
    return v;
  }();
  cl_mem theirs = env.buffer(data.size() * 4, data.data());
  cl_mem theirs_big = env.buffer(big.size() * 4, big.data());
  std::vector<cl_mem> landings;
  for (int i = 0; i < 8; ++i) landings.push_back(env.buffer(smalls[0].size() * 4));
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, ocl0, &stream) == ABR_OK);
  StagingChunkMib chunks("1");  // 2.5 MiB: three chunks, each failure with earlier ones in flight

  auto host = [](const std::vector<float>& v, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    return std::make_unique<Managed>(const_cast<float*>(v.data()), f32, std::move(shape), std::move(strides));
  };
  auto on_opencl = [](cl_mem mem, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    return std::make_unique<Managed>(mem, f32, std::move(shape), std::move(strides), 0, ocl0);
  };
  auto from_host = [&](std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {  // one source over `data`
    return [&, shape, strides](Run& run) { run.sources.push_back(host(data, shape, strides)); };
  };
  auto small_batch = [&](Run& run) {
    for (const auto& v : smalls) run.sources.push_back(host(v, {1024}));
  };
  const std::vector<Transfer> transfers = {
      {"host -> host copy, cast to f64", from_host({64, 48}),
       [&](abr_runtime* r, Run& run) { return to_device(r, run, cpu, f64); }},
      {"host strided -> opencl:0", from_host({48, 64}, {1, 48}),
       [&](abr_runtime* r, Run& run) { return to_device(r, run, ocl0); }},
      {"host -> opencl:0, cast to f64 by a kernel", from_host({64, 48}),
       [&](abr_runtime* r, Run& run) { return to_device(r, run, ocl0, f64); }},
      {"host -> opencl:0 on a stream", from_host({64, 48}),
       [&](abr_runtime* r, Run& run) { return to_device(r, run, ocl0, {}, stream); }},
      {"opencl (caller's context) -> host, strided",
       [&](Run& run) {
         run.sources.push_back(on_opencl(theirs, {48, 64}, {1, 48}));
       },
       [&](abr_runtime* r, Run& run) { return to_device(r, run, cpu); }},
      {"opencl (caller's context) -> opencl:0, three chunks",
       [&](Run& run) { run.sources.push_back(on_opencl(theirs_big, {static_cast<int64_t>(big.size())})); },
       [&](abr_runtime* r, Run& run) { return to_device(r, run, ocl0); }},
      {"batch: 64 x 4 KiB into the CPU", small_batch,
       [&](abr_runtime* r, Run& run) { return to_device_many(r, run, cpu); }},
      {"batch: 64 x 4 KiB to opencl:0", small_batch,
       [&](abr_runtime* r, Run& run) { return to_device_many(r, run, ocl0); }},
      {"batch: 64 x 4 KiB to opencl:0 on a stream", small_batch,
       [&](abr_runtime* r, Run& run) { return to_device_many(r, run, ocl0, stream); }},
      {"batch: 2.5 MiB (three chunks) and 4 KiB to opencl:0",
       [&](Run& run) {
         run.sources.push_back(host(big, {static_cast<int64_t>(big.size())}));
         run.sources.push_back(host(smalls[0], {1024}));
       },
       [&](abr_runtime* r, Run& run) { return to_device_many(r, run, ocl0); }},
      {"copy_many: 8 x 4 KiB into the caller's opencl:0 buffers",
       [&](Run& run) {
         const std::vector<float> zeros(1024, 0.0f);  // what a run that wrote nothing leaves
         for (int i = 0; i < 8; ++i) {
           REQUIRE(clEnqueueWriteBuffer(env.queue, landings[i], CL_TRUE, 0, 4096, zeros.data(), 0, nullptr, nullptr) ==
                   CL_SUCCESS);
           run.sources.push_back(host(smalls[i], {1024}));
           run.destinations.push_back(on_opencl(landings[i], {1024}));
         }
       },
       [&](abr_runtime* r, Run& run) {
         return abr_copy_many(r, run.srcs.data(), run.dsts.data(), run.srcs.size(), nullptr, nullptr, nullptr);
       }},
  };
  Walked all;
  for (const Transfer& transfer : transfers) {
    const Walked here = walk(rt, transfer);
    CHECK_MESSAGE(here.failures > 0, transfer.name);  // every transfer allocates, so each has failures to show
    MESSAGE(std::string(transfer.name) << ": " << here.failures << " failed, " << here.recovered << " recovered");
    all.failures += here.failures;
    all.recovered += here.recovered;
  }
  MESSAGE("out of memory across " << transfers.size() << " transfers: " << all.failures << " calls failed cleanly, "
                                  << all.recovered << " succeeded whole despite a failed allocation");
  abr_stream_destroy(stream);
  for (cl_mem mem : landings) clReleaseMemObject(mem);
  clReleaseMemObject(theirs);
  clReleaseMemObject(theirs_big);
}
