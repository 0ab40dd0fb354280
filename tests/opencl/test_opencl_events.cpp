// Events and streams let go of without waiting (abr_event_*, abr_stream_release)
// on a real OpenCL driver (PoCL here): a queue held shut by a user event keeps
// the work pending for as long as a test needs, so nothing depends on timing.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/opencl_helpers.hpp"

using namespace test;

TEST_CASE("OpenCL events: pending while the queue is shut, complete after; a wait on the host returns the values") {
  Runtime rt;
  ClEnv env;
  GatedQueue gated(env);
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_wrap(rt, ocl0, env.queue, &stream) == ABR_OK);
  std::vector<int32_t> data(4096);
  for (int i = 0; i < 4096; ++i) data[i] = 7 * i - 3;
  cl_mem buffer = env.buffer(data.size() * 4);
  std::vector<int64_t> shape{4096};
  DLTensor host{data.data(), cpu, 1, i32, shape.data(), nullptr, 0};
  DLTensor device{buffer, ocl0, 1, i32, shape.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &host, &device, nullptr, stream) == ABR_OK);  // the caller's context: queued, not waited
  abr_event* done = nullptr;
  REQUIRE(abr_event_record(stream, &done) == ABR_OK);
  CHECK(abr_event_query(done) == ABR_NOT_READY);
  CHECK(abr_event_query(done) == ABR_NOT_READY);  // asking never waits, nor changes the answer

  gated.open();
  REQUIRE(abr_event_synchronize(done) == ABR_OK);
  CHECK(abr_event_query(done) == ABR_OK);
  CHECK(std::memcmp(read_mem(buffer, 0, 4096 * 4).data(), data.data(), 4096 * 4) == 0);
  abr_event_destroy(done);
  abr_stream_destroy(stream);
  clReleaseMemObject(buffer);

  CHECK(abr_event_query(nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_event_query: event is NULL"));
  CHECK(abr_event_record(nullptr, &done) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(done == nullptr);
  CHECK(abr_stream_wait_event(nullptr, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_status_string(ABR_NOT_READY)) == "ABR_NOT_READY");
  abr_event_destroy(nullptr);  // accepted, as abr_stream_destroy(NULL) is
}

TEST_CASE("CPU events are complete when recorded; a device stream waits for one at once") {
  Runtime rt;
  abr_stream *host = nullptr, *device = nullptr;
  REQUIRE(abr_stream_create(rt, cpu, &host) == ABR_OK);
  REQUIRE(abr_stream_create(rt, ocl0, &device) == ABR_OK);
  abr_event* done = nullptr;
  REQUIRE(abr_event_record(host, &done) == ABR_OK);
  CHECK(abr_event_query(done) == ABR_OK);
  CHECK(abr_event_synchronize(done) == ABR_OK);
  CHECK(abr_stream_wait_event(device, done) == ABR_OK);
  abr_event_destroy(done);
  abr_stream_release(host);
  abr_stream_release(device);
}

TEST_CASE("OpenCL abr_stream_wait_event: a second queue waits on the device, the host does not block") {
  Runtime rt;
  ClEnv env;
  GatedQueue gated(env);
  cl_int status = CL_SUCCESS;
  cl_command_queue second = clCreateCommandQueueWithProperties(env.context, env.device, nullptr, &status);
  REQUIRE(status == CL_SUCCESS);
  abr_stream *producer = nullptr, *consumer = nullptr;
  REQUIRE(abr_stream_wrap(rt, ocl0, env.queue, &producer) == ABR_OK);
  REQUIRE(abr_stream_wrap(rt, ocl0, second, &consumer) == ABR_OK);
  std::vector<int32_t> data(2048), result(2048, 0);
  for (int i = 0; i < 2048; ++i) data[i] = i ^ 0x5a5a;
  cl_mem buffer = env.buffer(data.size() * 4);
  std::vector<int64_t> shape{2048};
  DLTensor host_data{data.data(), cpu, 1, i32, shape.data(), nullptr, 0};
  DLTensor device{buffer, ocl0, 1, i32, shape.data(), nullptr, 0};
  DLTensor host_result{result.data(), cpu, 1, i32, shape.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &host_data, &device, nullptr, producer) == ABR_OK);
  abr_event* written = nullptr;
  REQUIRE(abr_event_record(producer, &written) == ABR_OK);
  REQUIRE(abr_stream_wait_event(consumer, written) == ABR_OK);  // returns with the producer still shut
  CHECK(abr_event_query(written) == ABR_NOT_READY);
  REQUIRE(abr_copy(rt, &device, &host_result, nullptr, consumer) == ABR_OK);
  clFlush(second);
  CHECK(result[1] == 0);  // the consumer waits for the shut producer
  gated.open();
  REQUIRE(abr_stream_synchronize(consumer) == ABR_OK);
  CHECK(result == data);
  abr_event_destroy(written);
  abr_stream_destroy(consumer);
  abr_stream_destroy(producer);
  clReleaseCommandQueue(second);
  clReleaseMemObject(buffer);
}

TEST_CASE("OpenCL abr_stream_release: the source lives until its work is done, then goes; the values arrive") {
  for (const bool by_query : {false, true}) {
    CAPTURE(by_query);
    abr_runtime* rt = nullptr;
    REQUIRE(abr_runtime_create(nullptr, &rt) == ABR_OK);
    auto gated = std::make_unique<RuntimeGatedQueue>(rt);  // the write stays queued until the test opens it
    abr_stream* stream = nullptr;
    REQUIRE(abr_stream_wrap(rt, ocl0, gated->queue, &stream) == ABR_OK);

    std::vector<float> data(1 << 16);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = 0.5f * static_cast<float>(i);
    Managed src(data.data(), f32, {1 << 16});
    Owned device(copy_to(rt, &src.managed, ocl0, stream));
    abr_event* done = nullptr;
    REQUIRE(abr_event_record(stream, &done) == ABR_OK);
    abr_stream_release(stream);  // returns at once: the write is still shut in
    CHECK(abr_event_query(done) == ABR_NOT_READY);
    CHECK(src.deleted == 0);  // still read by the queued write

    gated->open();
    if (by_query) {
      while (abr_event_query(done) == ABR_NOT_READY) {
      }
    } else {
      REQUIRE(abr_event_synchronize(done) == ABR_OK);
    }
    CHECK(src.deleted == 1);  // seeing the event complete released it, not the runtime's next call
    gated.reset();
    abr_runtime_destroy(rt);
    CHECK(src.deleted == 1);
    CHECK(std::memcmp(read_mem(static_cast<cl_mem>(device->data), 0, data.size() * 4).data(), data.data(),
                      data.size() * 4) == 0);
    abr_event_destroy(done);
  }
}

// A forked child (a DataLoader's worker) waited for ever on the parent's queued work:
// the driver's threads stay in the parent. Bits of the child's exit code say which check failed.
int forked_child_checks(abr_stream* queued_on, abr_stream* own, abr_event* pending, abr_event* complete) {
  alarm(30);  // a hang ends the child with SIGALRM, which the parent sees
  int failed = 0;
  const auto expect = [&failed](bool ok, int bit) { failed |= ok ? 0 : bit; };
  expect(abr_event_query(pending) == ABR_ERR_BACKEND_UNAVAILABLE &&
             error_mentions("this event was made before this process"),
         1);
  expect(abr_event_synchronize(pending) == ABR_ERR_BACKEND_UNAVAILABLE, 2);
  expect(abr_stream_synchronize(queued_on) == ABR_ERR_BACKEND_UNAVAILABLE &&
             error_mentions("this stream was made before this process"),
         4);
  abr_event* more = nullptr;
  expect(abr_event_record(own, &more) == ABR_ERR_BACKEND_UNAVAILABLE && more == nullptr, 8);
  expect(abr_event_synchronize(complete) == ABR_OK, 16);  // complete when recorded: no driver to ask
  abr_event_destroy(pending);  // each lets the parent's driver object go without a call into it
  abr_stream_destroy(queued_on);
  abr_stream_release(own);
  abr_runtime* second = nullptr;  // a runtime of the child's own leaves the inherited drivers shut
  expect(abr_runtime_create(nullptr, &second) == ABR_OK, 32);
  int32_t devices = 0;
  expect(abr_device_count(second, &devices) == ABR_OK && devices == 1, 64);  // the CPU
  struct abr_backend_info said = ABR_BACKEND_INFO_INIT;
  expect(abr_backend_info(second, ABR_BACKEND_OPENCL, &said) == ABR_OK && said.available == 0 &&
             std::strstr(said.detail, "which forked this one") != nullptr,
         128);
  abr_runtime_destroy(second);
  return failed;
}

TEST_CASE(
    "OpenCL after fork: the parent's streams and events are refused in the child, never waited on, and let go "
    "of without a hang; a runtime made there opens no driver") {
  Runtime rt;
  ClEnv env;
  GatedQueue gated(env);  // the parent's work stays queued across the fork
  abr_stream *queued_on = nullptr, *own = nullptr, *host = nullptr;
  REQUIRE(abr_stream_wrap(rt, ocl0, env.queue, &queued_on) == ABR_OK);
  REQUIRE(abr_stream_create(rt, ocl0, &own) == ABR_OK);
  REQUIRE(abr_stream_create(rt, cpu, &host) == ABR_OK);
  std::vector<int32_t> data(4096);
  for (int i = 0; i < 4096; ++i) data[i] = 5 * i + 1;
  cl_mem buffer = env.buffer(data.size() * 4);
  std::vector<int64_t> shape{4096};
  DLTensor from{data.data(), cpu, 1, i32, shape.data(), nullptr, 0};
  DLTensor to{buffer, ocl0, 1, i32, shape.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &from, &to, nullptr, queued_on) == ABR_OK);
  abr_event *pending = nullptr, *complete = nullptr;
  REQUIRE(abr_event_record(queued_on, &pending) == ABR_OK);
  REQUIRE(abr_event_record(host, &complete) == ABR_OK);

  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(forked_child_checks(queued_on, own, pending, complete));
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));  // not SIGALRM: nothing hung
  CHECK(WEXITSTATUS(status) == 0);

  gated.open();  // the parent's are still its own
  REQUIRE(abr_event_synchronize(pending) == ABR_OK);
  CHECK(std::memcmp(read_mem(buffer, 0, 4096 * 4).data(), data.data(), 4096 * 4) == 0);
  abr_event_destroy(pending);
  abr_event_destroy(complete);
  abr_stream_destroy(queued_on);
  abr_stream_destroy(own);
  abr_stream_destroy(host);
  clReleaseMemObject(buffer);
}

// The runtime's pending releases came with the fork: asking their events, and
// releasing what they keep, would call the parent's driver from the child (a
// deadlock if a parent thread held a lock the driver needs at the fork). What
// the child asks of its own CPU stream, made before the fork, must not do that.
TEST_CASE("OpenCL after fork: what the parent's released streams keep is left to the parent; a CPU stream works") {
  abr_runtime* rt = nullptr;
  REQUIRE(abr_runtime_create(nullptr, &rt) == ABR_OK);
  auto gated = std::make_unique<RuntimeGatedQueue>(rt);
  abr_stream *released = nullptr, *host = nullptr;
  REQUIRE(abr_stream_wrap(rt, ocl0, gated->queue, &released) == ABR_OK);
  REQUIRE(abr_stream_create(rt, cpu, &host) == ABR_OK);
  std::vector<float> data(1 << 14, 1.5f);
  Managed src(data.data(), f32, {1 << 14});
  Owned device(copy_to(rt, &src.managed, ocl0, released));
  abr_stream_release(released);  // the source goes to the runtime's pending releases
  abr_event* complete = nullptr;
  REQUIRE(abr_event_record(host, &complete) == ABR_OK);  // complete when recorded; it collects releases
  gated->open();
  REQUIRE(clFinish(gated->queue) == CL_SUCCESS);  // done, and not yet collected: no call of ours since
  REQUIRE(src.deleted == 0);

  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    alarm(30);
    int failed = abr_event_synchronize(complete) == ABR_OK ? 0 : 1;
    failed |= abr_stream_synchronize(host) == ABR_OK ? 0 : 2;
    failed |= src.deleted == 0 ? 0 : 4;  // the parent's to release, not this child's
    abr_stream_destroy(host);
    _exit(failed);
  }
  int exit_status = 0;
  REQUIRE(waitpid(child, &exit_status, 0) == child);
  CHECK(WIFEXITED(exit_status));
  CHECK(WEXITSTATUS(exit_status) == 0);
  REQUIRE(abr_event_synchronize(complete) == ABR_OK);
  CHECK(src.deleted == 1);  // the parent released it
  abr_event_destroy(complete);
  abr_stream_destroy(host);
  device.reset();
  gated.reset();
  abr_runtime_destroy(rt);
}

// A tensor made before the fork is the parent's: the child that drops it must not call
// clReleaseMemObject (PoCL's threads stayed in the parent, and a lock one of them held at
// the fork would hang the call). Seen through the buffer's destructor callback, which the
// driver runs when the last reference goes.
static std::atomic<int> g_buffer_destroyed{0};

TEST_CASE(
    "OpenCL after fork: a tensor the parent made is dropped in the child without a call into the driver, a host "
    "wrap's source given back there") {
  Runtime rt;
  std::vector<float> data(1024, 2.5f);
  Managed src(data.data(), f32, {1024});
  Owned device(copy_to(rt, &src.managed, ocl0, nullptr));
  cl_mem buffer = static_cast<cl_mem>(device->data);
  REQUIRE(clSetMemObjectDestructorCallback(
              buffer, [](cl_mem, void*) { g_buffer_destroyed = 1; }, nullptr) == CL_SUCCESS);

  // A host wrap made before the fork: dropped in the child, its source goes back there too
  // (the buffer's destructor callback, which would, never runs in the child).
  DLDevice shared;
  const bool wraps = opencl_sharing_host_memory(rt, &shared);
  std::unique_ptr<float, decltype(&std::free)> host(static_cast<float*>(std::aligned_alloc(4096, 4096)), std::free);
  std::fill_n(host.get(), 1024, 4.5f);
  Managed wrapped_src(host.get(), f32, {1024});  // aligned as any device wraps it
  Owned wrap(wraps ? move_to(rt, &wrapped_src.managed, shared, ABR_COPY_NEVER, ABR_PATH_HOST_WRAP) : nullptr);

  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    alarm(30);
    device.reset();  // its deleter: the parent's cl_mem, let go
    wrap.reset();
    _exit((g_buffer_destroyed.load() == 0 ? 0 : 1) | (!wraps || wrapped_src.deleted == 1 ? 0 : 2));
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));  // not SIGALRM: nothing hung
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(g_buffer_destroyed == 0);
  device.reset();  // the parent's to release, and released (a driver may run the callback on a thread of its own)
  for (int waited = 0; g_buffer_destroyed == 0 && waited < 1000; ++waited) usleep(1000);
  CHECK(g_buffer_destroyed == 1);
  CHECK(wrapped_src.deleted == 0);  // the parent's source is the parent's
  wrap.reset();                     // given back by the buffer's destructor callback: maybe on a driver thread
  for (int waited = 0; wraps && wrapped_src.deleted == 0 && waited < 1000; ++waited) usleep(1000);
  if (wraps) CHECK(wrapped_src.deleted == 1);
}

// The threads hunt of 2026-11-30: a child forked while a parent thread held the pinned
// pool's lock (a transfer, or only its statistics) waited for it for ever in
// abr_pool_get_stats: no thread of the child ever lets it go. The pool and the device
// caches are the parent's drivers' state: in the child their statistics are zeros
// and their limits refused, without taking their locks.
TEST_CASE("OpenCL after fork: the pool's and the device caches' statistics and limits never wait in the child") {
  Runtime rt;
  std::vector<float> data(1024, 1.0f);
  Managed src(data.data(), f32, {1024});
  Owned device(copy_to(rt, &src.managed, ocl0, nullptr));  // the drivers are open
  std::atomic<bool> stop{false};
  std::thread asker([&] {  // the pool's and the caches' locks taken and let go all the time
    for (abr_pool_stats stats = ABR_POOL_STATS_INIT; !stop;) {
      abr_pool_get_stats(rt, &stats);
      abr_device_cache_get_stats(rt, &stats);
    }
  });
  int hung = 0, wrong = 0;
  for (int i = 0; i < 40; ++i) {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      alarm(10);
      abr_pool_stats pool = ABR_POOL_STATS_INIT, cache = ABR_POOL_STATS_INIT;
      const bool read = abr_pool_get_stats(rt, &pool) == ABR_OK && abr_device_cache_get_stats(rt, &cache) == ABR_OK &&
          pool.bytes_pinned == 0 && pool.limit_bytes == 0 && cache.bytes_pinned == 0;
      const bool refused = abr_pool_set_limit(rt, 1 << 20) == ABR_ERR_BACKEND_UNAVAILABLE &&
          abr_device_cache_set_limit(rt, 1 << 20) == ABR_ERR_BACKEND_UNAVAILABLE;
      _exit(read && refused ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    hung += !WIFEXITED(status);  // SIGALRM
    wrong += WIFEXITED(status) && WEXITSTATUS(status) != 0;
  }
  stop = true;
  asker.join();
  CHECK(hung == 0);
  CHECK(wrong == 0);
  abr_pool_stats pool = ABR_POOL_STATS_INIT;  // the parent's pool is as it was
  REQUIRE(abr_pool_get_stats(rt, &pool) == ABR_OK);
  CHECK(pool.limit_bytes > 0);
}
