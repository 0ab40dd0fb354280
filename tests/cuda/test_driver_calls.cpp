// What one small transfer costs in CUDA driver calls, path by path, counted by
// the fake driver (docs/architecture/backends.md gives the table this test prints). Each
// path runs warm: after one call that creates streams, contexts and cached blocks.
// The counts include the reclaimer's thread (a deleted tensor's barrier).
#include <map>
#include <string>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"

using namespace test;

namespace {

#define ABR_COUNTED(name) ABR_TEST_CUDA_SYMBOL(name)
// Every entry point a transfer may call, by its exported name.
const char* const kCalls[] = {ABR_COUNTED(cuCtxGetCurrent),
                              ABR_COUNTED(cuCtxPushCurrent),
                              ABR_COUNTED(cuCtxPopCurrent),
                              ABR_COUNTED(cuCtxSynchronize),
                              ABR_COUNTED(cuMemAlloc),
                              ABR_COUNTED(cuMemAllocAsync),
                              ABR_COUNTED(cuMemFree),
                              ABR_COUNTED(cuMemFreeAsync),
                              ABR_COUNTED(cuMemHostAlloc),
                              ABR_COUNTED(cuMemFreeHost),
                              ABR_COUNTED(cuPointerGetAttribute),
                              ABR_COUNTED(cuPointerGetAttributes),
                              ABR_COUNTED(cuMemHostRegister),
                              ABR_COUNTED(cuMemHostUnregister),
                              ABR_COUNTED(cuMemcpyHtoDAsync),
                              ABR_COUNTED(cuMemcpyDtoHAsync),
                              ABR_COUNTED(cuMemcpyDtoDAsync),
                              ABR_COUNTED(cuMemcpyPeerAsync),
                              ABR_COUNTED(cuStreamCreate),
                              ABR_COUNTED(cuStreamDestroy),
                              ABR_COUNTED(cuStreamSynchronize),
                              ABR_COUNTED(cuStreamGetCtx),
                              ABR_COUNTED(cuEventCreate),
                              ABR_COUNTED(cuEventRecord),
                              ABR_COUNTED(cuEventQuery),
                              ABR_COUNTED(cuEventSynchronize),
                              ABR_COUNTED(cuEventDestroy),
                              ABR_COUNTED(cuStreamWaitEvent),
                              ABR_COUNTED(cuLaunchKernel),
                              ABR_COUNTED(cuDevicePrimaryCtxRetain),
                              ABR_COUNTED(cuDevicePrimaryCtxRelease)};

using Counts = std::map<std::string, long long>;

Counts snapshot(const Fake& fake) {
  Counts counts;
  for (const char* name : kCalls) counts[name] = fake.stat((std::string("calls:") + name).c_str());
  return counts;
}

// The calls `run` makes, per run, over `repeats` runs after one to warm up.
template <class F>
Counts calls_of(const Fake& fake, F&& run, int repeats = 8) {
  run();
  const Counts before = snapshot(fake);
  for (int i = 0; i < repeats; ++i) run();
  const Counts after = snapshot(fake);
  Counts per_run;
  for (const auto& entry : after) {
    const long long n = entry.second - before.at(entry.first);
    if (n) per_run[entry.first] = n / repeats;
    CHECK_MESSAGE(n % repeats == 0, entry.first << ": " << n << " calls in " << repeats << " runs");
  }
  return per_run;
}

std::string line(const char* path, const Counts& counts) {
  std::string text = std::string(path) + ":";
  for (const auto& entry : counts) text += " " + entry.first + " " + std::to_string(entry.second);
  return text;
}

long long of(const Counts& counts, const char* name) {
  const auto found = counts.find(name);
  return found == counts.end() ? 0 : found->second;
}

// Waits until deleted tensors' blocks are back in the device cache: `in_use` bytes left lent.
void wait_returned(abr_runtime* rt, uint64_t in_use) {
  abr_pool_stats stats = ABR_POOL_STATS_INIT;
  const bool back =
      wait_until([&] { return abr_device_cache_get_stats(rt, &stats) == ABR_OK && stats.bytes_in_use == in_use; });
  if (!back) FAIL("a deleted tensor's block did not come back within 5 s");
}

// The warm 4 KiB tensors both cases move: a pageable source and landing, two
// cuda:0 tensors, and a stream of cuda:0.
struct Tensors {
  std::vector<int32_t> host = iota(1024), back = std::vector<int32_t>(1024), zeros = std::vector<int32_t>(1024);
  Managed pageable{host.data(), i32, {1024}};
  Managed landing{back.data(), i32, {1024}};
  Managed zero_source{zeros.data(), i32, {1024}};
  Owned device, device2;
  abr_stream* stream = nullptr;
  explicit Tensors(abr_runtime* rt)
      : device(move_to(rt, &pageable.managed, cuda0)), device2(move_to(rt, &zero_source.managed, cuda0)) {
    REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  }
  ~Tensors() { abr_stream_destroy(stream); }
  Tensors(const Tensors&) = delete;
  Tensors& operator=(const Tensors&) = delete;
};

}  // namespace

TEST_CASE_FIXTURE(NoDriverFindings, "driver calls of one 4 KiB transfer, path by path") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  Tensors w(rt);
  // Page-locked host memory: a cuda_host tensor of the runtime's.
  Managed pinned_source(w.host.data(), i32, {1024});
  Owned pinned(move_to(rt, &pinned_source.managed, cuda_host));

  const Counts pinned_h2d_on_stream = calls_of(
      fake, [&] { REQUIRE(abr_copy(rt, &pinned.t->dl_tensor, &w.device.t->dl_tensor, nullptr, w.stream) == ABR_OK); });
  REQUIRE(abr_stream_synchronize(w.stream) == ABR_OK);  // before the runtime's own stream writes there too
  const Counts pinned_h2d = calls_of(
      fake, [&] { REQUIRE(abr_copy(rt, &pinned.t->dl_tensor, &w.device.t->dl_tensor, nullptr, nullptr) == ABR_OK); });
  const Counts pageable_h2d = calls_of(
      fake, [&] { REQUIRE(abr_copy(rt, &w.pageable.tensor(), &w.device.t->dl_tensor, nullptr, nullptr) == ABR_OK); });
  const Counts pageable_d2h = calls_of(
      fake, [&] { REQUIRE(abr_copy(rt, &w.device.t->dl_tensor, &w.landing.tensor(), nullptr, nullptr) == ABR_OK); });
  const Counts d2d_on_stream = calls_of(fake, [&] {
    REQUIRE(abr_copy(rt, &w.device.t->dl_tensor, &w.device2.t->dl_tensor, nullptr, w.stream) == ABR_OK);
  });
  REQUIRE(abr_stream_synchronize(w.stream) == ABR_OK);
  abr_pool_stats lent = ABR_POOL_STATS_INIT;
  REQUIRE(abr_device_cache_get_stats(rt, &lent) == ABR_OK);
  const Counts new_tensor = calls_of(fake, [&] {
    Managed source(w.host.data(), i32, {1024});
    Owned t(move_to(rt, &source.managed, cuda0));
    t.reset();
    wait_returned(rt, lent.bytes_in_use);
  });
  // Between backends into existing tensors, one chunk through OpenCL's mapped block registered with CUDA.
  Owned on_cl(move_to(rt, &w.pageable.managed, DLDevice{kDLOpenCL, 0}));
  const Counts cuda_to_cl = calls_of(
      fake, [&] { REQUIRE(abr_copy(rt, &w.device.t->dl_tensor, &on_cl.t->dl_tensor, nullptr, nullptr) == ABR_OK); });
  const Counts cl_to_cuda = calls_of(
      fake, [&] { REQUIRE(abr_copy(rt, &on_cl.t->dl_tensor, &w.device.t->dl_tensor, nullptr, nullptr) == ABR_OK); });

  MESSAGE(line("pinned H2D on the caller's stream", pinned_h2d_on_stream));
  MESSAGE(line("pinned H2D, no stream", pinned_h2d));
  MESSAGE(line("pageable H2D, no stream", pageable_h2d));
  MESSAGE(line("pageable D2H, no stream", pageable_d2h));
  MESSAGE(line("D2D on the caller's stream", d2d_on_stream));
  MESSAGE(line("to_device host -> new cuda:0 tensor, deleted", new_tensor));
  MESSAGE(line("cuda:0 -> existing opencl:0 tensor", cuda_to_cl));
  MESSAGE(line("opencl:0 -> existing cuda:0 tensor", cl_to_cuda));

  // A pinned H2D on the caller's stream is the copy and what ordering needs: no
  // allocation, no synchronization, no event.
  CHECK(of(pinned_h2d_on_stream, ABR_COUNTED(cuMemcpyHtoDAsync)) == 1);
  CHECK(of(pinned_h2d_on_stream, ABR_COUNTED(cuStreamSynchronize)) == 0);
  CHECK(of(pinned_h2d_on_stream, ABR_COUNTED(cuMemAlloc)) + of(pinned_h2d_on_stream, ABR_COUNTED(cuMemAllocAsync)) ==
        0);
  CHECK(of(pinned_h2d_on_stream, ABR_COUNTED(cuEventRecord)) == 0);
  CHECK(of(d2d_on_stream, ABR_COUNTED(cuMemcpyDtoDAsync)) == 1);
  CHECK(of(d2d_on_stream, ABR_COUNTED(cuStreamSynchronize)) == 0);
  // Without a stream the call returns finished: one copy and one wait.
  for (const Counts* c : {&pinned_h2d, &pageable_h2d, &pageable_d2h}) {
    CHECK(of(*c, ABR_COUNTED(cuMemAlloc)) + of(*c, ABR_COUNTED(cuMemAllocAsync)) == 0);
    CHECK(of(*c, ABR_COUNTED(cuStreamSynchronize)) == 1);
  }
  // A new tensor of a size seen before: the cached block, no cuMemAlloc or cuMemFree.
  CHECK(of(new_tensor, ABR_COUNTED(cuMemAlloc)) == 0);
  CHECK(of(new_tensor, ABR_COUNTED(cuMemFree)) == 0);
  CHECK(of(new_tensor, ABR_COUNTED(cuMemcpyHtoDAsync)) == 1);
  // One chunk between backends: CUDA's side waits in its stream, no event.
  CHECK(of(cuda_to_cl, ABR_COUNTED(cuMemcpyDtoHAsync)) == 1);
  CHECK(of(cuda_to_cl, ABR_COUNTED(cuStreamSynchronize)) == 1);
  CHECK(of(cuda_to_cl, ABR_COUNTED(cuEventCreate)) == 0);
  CHECK(of(cl_to_cuda, ABR_COUNTED(cuMemcpyHtoDAsync)) == 1);
  CHECK(of(cl_to_cuda, ABR_COUNTED(cuStreamSynchronize)) == 1);
  CHECK(of(cl_to_cuda, ABR_COUNTED(cuEventCreate)) == 0);      // waited for in its stream: the block needs no event
  CHECK(of(cl_to_cuda, ABR_COUNTED(cuMemHostRegister)) == 0);  // the block registered once, cached
}

// A framework's thread (PyTorch, CuPy, JAX) has the device's primary context
// current already: a transfer then pushes and pops nothing, on every path.
TEST_CASE_FIXTURE(NoDriverFindings, "with the primary context current, a transfer pushes no context") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  Tensors w(rt);
  abr_pool_stats lent = ABR_POOL_STATS_INIT;
  REQUIRE(abr_device_cache_get_stats(rt, &lent) == ABR_OK);
  {
    RawDriver framework;  // the primary context made current on this thread
    const std::vector<std::pair<const char*, Counts>> paths = {
        {"pageable H2D, no stream",
         calls_of(
             fake,
             [&] { REQUIRE(abr_copy(rt, &w.pageable.tensor(), &w.device.t->dl_tensor, nullptr, nullptr) == ABR_OK); })},
        {"pageable D2H, no stream",
         calls_of(
             fake,
             [&] { REQUIRE(abr_copy(rt, &w.device.t->dl_tensor, &w.landing.tensor(), nullptr, nullptr) == ABR_OK); })},
        {"D2D on the caller's stream",
         calls_of(fake,
                  [&] {
                    REQUIRE(abr_copy(rt, &w.device.t->dl_tensor, &w.device2.t->dl_tensor, nullptr, w.stream) == ABR_OK);
                    REQUIRE(abr_stream_synchronize(w.stream) == ABR_OK);
                  })},
        {"to_device host -> new cuda:0 tensor",
         calls_of(fake,
                  [&] {
                    Managed source(w.host.data(), i32, {1024});
                    Owned t(move_to(rt, &source.managed, cuda0));
                    CHECK(read_back(rt, t.t->dl_tensor) == w.host);
                    t.reset();
                    wait_returned(rt, lent.bytes_in_use);
                  })},
    };
    for (const auto& path : paths) {
      MESSAGE(line(path.first, path.second));
      // The reclaimer's thread has no context current: it pushes its own, once a barrier.
      CHECK_MESSAGE(of(path.second, ABR_COUNTED(cuCtxPushCurrent)) == of(path.second, ABR_COUNTED(cuCtxSynchronize)),
                    path.first);
      CHECK_MESSAGE(of(path.second, ABR_COUNTED(cuCtxPopCurrent)) == of(path.second, ABR_COUNTED(cuCtxPushCurrent)),
                    path.first);
      CHECK_MESSAGE(of(path.second, ABR_COUNTED(cuCtxGetCurrent)) >= 1, path.first);
    }
  }
  CHECK(w.back == w.host);
}
