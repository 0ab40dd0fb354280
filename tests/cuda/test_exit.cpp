// A process that ends with its runtime alive, as every Python process does (the
// package never destroys its runtime): exit's handlers free the process's statics
// while the runtime's threads still run. Seen under valgrind on the fake driver
// (2026-11-27): the reclaimer, waiting for the device before freeing deleted results,
// came back into a CUDA driver table freed at exit ("malloc_consolidate(): unaligned
// fastbin chunk detected" as Python ended). The child below holds exit open (a hook
// registered before anything else runs last) while its reclaimer is inside a lagged
// wait, so anything freed at exit that the reclaimer touches is touched after its
// free: ASan reports it, and without ASan the child may crash.
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"
#include "tests/support/process.hpp"

using namespace test;

namespace {

// What the child leaves alive at exit, held by a static so that LeakSanitizer counts it
// reachable, as a Python process's runtime is.
struct LeftAlive {
  abr_runtime* rt = nullptr;
  abr_stream* stream = nullptr;
  std::vector<int32_t> data = std::vector<int32_t>(1 << 16, 7);
  Managed first{data.data(), i32, {1 << 16}};
  Managed queued{data.data(), i32, {1 << 16}};
  DLManagedTensorVersioned* result = nullptr;
  DLManagedTensorVersioned* queued_result = nullptr;
};
LeftAlive* volatile g_left_alive = nullptr;  // volatile: a store nothing reads here is kept

}  // namespace

// Exit codes: 0 when exit went through; 10-13 name the step that failed before it.
int exit_child_main() {
  std::atexit([] { std::this_thread::sleep_for(std::chrono::milliseconds(600)); });
  LeftAlive& left = *(g_left_alive = new LeftAlive);
  if (abr_runtime_create(nullptr, &left.rt) != ABR_OK) return 10;
  if (abr_to_device(left.rt, &left.first.managed, cuda0, nullptr, nullptr, &left.result) != ABR_OK) return 11;
  if (abr_stream_create(left.rt, cuda0, &left.stream) != ABR_OK) return 12;
  Fake fake;
  if (fake) fake.control("delay_us", 300000);  // the next copy lags 0.3 s, and every wait for the device with it
  if (abr_to_device(left.rt, &left.queued.managed, cuda0, nullptr, left.stream, &left.queued_result) != ABR_OK)
    return 13;
  // Handed to the reclaimer, which waits for the device (the lagged copy) before freeing it.
  left.result->deleter(left.result);
  left.result = nullptr;
  return 0;  // exit, with the reclaimer inside that wait
}

TEST_CASE("CUDA a process ending with its runtime alive and the reclaimer waiting exits cleanly") {
  {
    Runtime rt;
    if (cuda_devices(rt) == 0) return;
  }
  int status = 0;
  const std::string said = run_this_program({"--exit-child"}, &status);
  INFO("child status " << status << " (10 runtime, 11 first copy, 12 stream, 13 queued copy; -N signal N)"
                       << "; it said: " << said);
  CHECK(status == 0);
}
