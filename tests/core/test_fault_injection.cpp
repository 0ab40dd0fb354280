// Walks every fault-injection point of representative transfers (lib/base/fault.hpp):
// each injected failure must give a clean error status naming the fault, leave
// the source with its owner (deleter not run), and leave the runtime working.
// LeakSanitizer checks that nothing leaked. Only the ASan build has the points.
#include "tests/support/fault_walk.hpp"
#include "tests/support/opencl_helpers.hpp"

using namespace test;

#ifndef ABR_FAULT_INJECTION
TEST_CASE("fault injection walk (compiled into the ASan build only)") {
  MESSAGE("skipped here: the fault-injection points exist only in build/asan/bin/unit-tests");
}
#else
TEST_CASE("every injected failure of a transfer is clean: status, ownership, no leak, runtime still works") {
  Runtime rt;
  ClEnv env;
  std::vector<float> data(64 * 48);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.25f;
  cl_mem theirs = env.buffer(data.size() * 4, data.data());
  // Between contexts in several chunks: a failure at every stage of the pipeline with earlier chunks in flight.
  StagingChunkMib chunks("1");
  std::vector<float> big((std::size_t{5} << 20) / 8);  // 2.5 MiB: three chunks
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 4093);
  cl_mem theirs_big = env.buffer(big.size() * 4, big.data());

  const std::vector<Scenario> scenarios = {
      {"host strided -> opencl, cast to f64",
       [&](abr_runtime* r, int& deleted) {
         Managed src(data.data(), f32, {48, 64}, {1, 48});
         return transfer(r, src, ocl0, ABR_COPY_ALWAYS, f64, nullptr, deleted);
       }},
      {"host -> host copy, cast to i32",
       [&](abr_runtime* r, int& deleted) {
         Managed src(data.data(), f32, {64, 48});
         return transfer(r, src, cpu, ABR_COPY_ALWAYS, i32, nullptr, deleted);
       }},
      {"opencl (caller's context) -> opencl, staged through the pool",
       [&](abr_runtime* r, int& deleted) {
         Managed src(theirs, f32, {64, 48}, {}, 0, ocl0);
         return transfer(r, src, ocl0, ABR_COPY_ALWAYS, {}, nullptr, deleted);
       }},
      {"opencl (caller's context) -> opencl, three chunks, cast to f64 by a kernel first",
       [&](abr_runtime* r, int& deleted) {
         Managed src(theirs_big, f32, {static_cast<int64_t>(big.size())}, {}, 0, ocl0);
         return transfer(r, src, ocl0, ABR_COPY_ALWAYS, f64, nullptr, deleted);
       }},
      {"opencl (caller's context) -> host, strided",
       [&](abr_runtime* r, int& deleted) {
         Managed src(theirs, f32, {48, 64}, {1, 48}, 0, ocl0);
         return transfer(r, src, cpu, ABR_COPY_ALWAYS, {}, nullptr, deleted);
       }},
      {"host -> opencl on a new stream",
       [&](abr_runtime* r, int& deleted) {
         Managed src(data.data(), f32, {64, 48});
         return transfer_on_new_stream(r, src, ocl0, deleted);
       }},
  };

  walk_faults(rt, scenarios);
  clReleaseMemObject(theirs);
  clReleaseMemObject(theirs_big);
}

TEST_CASE("a stream that cannot record its marker waits instead, and releases the source") {
  Runtime rt;
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, ocl0, &stream) == ABR_OK);
  std::vector<float> data(1024, 1.5f);
  Managed src(data.data(), f32, {1024});
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_ALWAYS;
  DLManagedTensorVersioned* out = nullptr;
  // The first point of a stream transfer that cannot throw: the marker in retain().
  for (uint64_t n = 1; n < 50 && !out; ++n) {
    abr::fault::arm(n);
    const abr_status status = abr_to_device(rt, &src.managed, ocl0, &options, stream, &out);
    abr::fault::arm(0);
    if (status != ABR_OK) CHECK(src.deleted == 0);
  }
  REQUIRE(out != nullptr);
  CHECK(src.deleted == 1);
  out->deleter(out);
  abr_stream_destroy(stream);
}
#endif
