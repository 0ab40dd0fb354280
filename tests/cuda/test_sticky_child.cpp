// A real sticky error, in a child process: the one kind of CUDA failure that
// ends a context for the rest of the process, so it cannot share the test
// process. The child launches one of our own kernels on addresses nothing owns
// (an illegal address on a GPU; the fake driver checks every byte and does the
// same), then proves the runtime reports the device lost, keeps the caller's
// source, flags the device and tears down without hanging or aborting.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/kernel_params.hpp"
#include "tests/cuda/cuda_helpers.hpp"

extern "C" const unsigned char abr_cuda_fatbin[];
extern char** environ;

using namespace test;

namespace {

// Exit codes of the child, each naming the step that went wrong.
enum ChildResult : int {
  kPassed = 0,
  kNoRuntime = 10,
  kNoDevice,
  kNoDriver,
  kNoKernel,
  kNoFault,
  kNotLost,
  kSourceLost,
  kNotFlagged,
  kNoWarning,
  kNotQueued,     // the queued-fault child: the faulting transfer did not return queued
  kReadAsDone,    // abr_event_query said ABR_OK for work that faulted
  kWaitNotLost,   // abr_event_synchronize did not return the sticky error
  kQueryNotLost,  // nor abr_event_query afterwards
};

bool cuda0_flagged_lost(abr_runtime* rt) {
  int32_t count = 0;
  abr_device_count(rt, &count);
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    if (abr_device_info(rt, i, &info) == ABR_OK && info.device.device_type == kDLCUDA && info.device.device_id == 0)
      return (info.flags & ABR_DEVICE_LOST_FLAG) != 0;
  }
  return false;
}

// Launches abr_copy_4 from and to addresses no allocation owns; returns what the
// synchronisation after it says.
CUresult fault_on_purpose(const abr::cuda::Driver& cu) {
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  if (cu.cuDeviceGet(&device, 0) || cu.cuDevicePrimaryCtxRetain(&context, device) || cu.cuCtxPushCurrent(context) ||
      cu.cuModuleLoadData(&module, abr_cuda_fatbin) ||
      cu.cuModuleGetFunction(&function, module, abr::cuda::kCopyKernelNames[2]))
    return CUDA_ERROR_NOT_FOUND;
  CUdeviceptr src = 0x1000, dst = 0x2000;
  abr::cuda::WalkParams walk{};
  walk.count = 1;
  walk.units = 1;
  int32_t unused = 0;
  void* args[5] = {&src, &dst, &walk, &unused, &unused};
  CUstream stream = nullptr;
  if (cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_NOT_FOUND;
  const CUresult launched = cu.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr);
  return launched != CUDA_SUCCESS ? launched : cu.cuStreamSynchronize(stream);
}

}  // namespace

int sticky_child_main() {
  CollectedWarnings warnings;  // "cuda:0 is lost", checked below rather than printed
  abr_runtime* rt = nullptr;
  if (abr_runtime_create(nullptr, &rt) != ABR_OK) return kNoRuntime;
  std::vector<int32_t> data(64, 7);
  Managed first(data.data(), i32, {64});
  DLManagedTensorVersioned* on_device = nullptr;
  if (abr_to_device(rt, &first.managed, cuda0, nullptr, nullptr, &on_device) != ABR_OK) return kNoDevice;
  std::string reason;
  const abr::cuda::Driver* cu = abr::cuda::driver(&reason);
  if (!cu) return kNoDriver;
  const CUresult fault = fault_on_purpose(*cu);
  if (fault == CUDA_ERROR_NOT_FOUND) return kNoKernel;
  if (!abr::cuda::is_sticky(fault)) return kNoFault;

  Managed later(data.data(), i32, {64});
  DLManagedTensorVersioned* out = nullptr;
  if (abr_to_device(rt, &later.managed, cuda0, nullptr, nullptr, &out) != ABR_ERR_DEVICE_LOST) return kNotLost;
  if (later.deleted != 0) return kSourceLost;  // a failed call leaves the source with the caller
  if (!cuda0_flagged_lost(rt)) return kNotFlagged;
  on_device->deleter(on_device);  // freeing memory of a dead context must neither hang nor abort
  abr_runtime_destroy(rt);
  return warnings.seen("cuda:0 is lost") ? kPassed : kNoWarning;
}

// A transfer queued on a stream whose kernel faults after the call returned (the
// fake's armed launch fault; the cast of int32 to float64 on the device is one
// launch): its event must never read as done. By `asking` first, abr_event_query
// gives the sticky error once the work failed; without, abr_event_synchronize
// (called while the work still waits its turn) returns it rather than waiting for
// a record the stopped device never reaches. Every later ask says it again.
int queued_fault_child_main(bool asking) {
  CollectedWarnings warnings;
  abr_runtime* rt = nullptr;
  if (abr_runtime_create(nullptr, &rt) != ABR_OK) return kNoRuntime;
  Fake fake;                    // loaded by the runtime
  if (!fake) return kNoDriver;  // arming a fault in our own queued work needs the fake
  std::vector<int32_t> data(1 << 12, 7);
  Managed first(data.data(), i32, {1 << 12});
  DLManagedTensorVersioned* on_device = nullptr;
  if (abr_to_device(rt, &first.managed, cuda0, nullptr, nullptr, &on_device) != ABR_OK) return kNoDevice;
  abr_stream* stream = nullptr;
  if (abr_stream_create(rt, cuda0, &stream) != ABR_OK) return kNoDevice;
  fake.control("delay_us", 20000);  // the call returns long before the kernel runs, as on a GPU
  fake.control("fault_launch", 1);
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.dtype = f64;
  DLManagedTensorVersioned* cast = nullptr;
  if (abr_to_device(rt, on_device, cuda0, &options, stream, &cast) != ABR_OK) return kNotQueued;
  abr_event* done = nullptr;
  if (abr_event_record(stream, &done) != ABR_OK || abr_event_query(done) != ABR_NOT_READY) return kNotQueued;
  if (asking) {
    abr_status status = ABR_NOT_READY;
    for (int asked = 0; asked < 5000 && status == ABR_NOT_READY; ++asked) {  // until the kernel faulted
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      status = abr_event_query(done);
    }
    if (status == ABR_OK) return kReadAsDone;
    if (status != ABR_ERR_DEVICE_LOST) return kQueryNotLost;
  }
  if (abr_event_synchronize(done) != ABR_ERR_DEVICE_LOST) return kWaitNotLost;
  if (abr_event_query(done) != ABR_ERR_DEVICE_LOST) return kQueryNotLost;
  if (abr_event_synchronize(done) != ABR_ERR_DEVICE_LOST) return kWaitNotLost;
  fake.control("delay_us", 0);
  abr_event_destroy(done);
  cast->deleter(cast);  // on_device went with the queued cast, which took it
  abr_stream_destroy(stream);
  abr_runtime_destroy(rt);
  return warnings.seen("cuda:0 is lost") ? kPassed : kNoWarning;
}

// Runs this program again as `flag`'s child; a child still running after two
// minutes hung.
static void run_child(const char* flag_text, const char* mode = "") {
  {
    Runtime rt;
    if (cuda_devices(rt) == 0) return;
  }
  char self[] = "/proc/self/exe";
  std::string flag = flag_text, second = mode;
  char* argv[] = {self, flag.data(), second.empty() ? nullptr : second.data(), nullptr};
  pid_t child = 0;
  REQUIRE(posix_spawn(&child, self, nullptr, nullptr, argv, environ) == 0);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      FAIL("the child hung after the sticky error");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  INFO("child exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status))
                            << " (10 runtime, 11 device, 12 driver, 13 kernel, 14 no fault, 15 not lost, "
                               "16 source deleted, 17 not flagged, 18 no warning, 19 not queued, 20 read as "
                               "done, 21 wait not lost, 22 query not lost)");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kPassed);
}

TEST_CASE("CUDA a real sticky error in a child process: device lost, source kept, flagged, clean exit") {
  run_child("--sticky-child");
}

TEST_CASE("CUDA queued work that faults: its event never reads as done, and waiting returns the error") {
  {
    Runtime rt;
    if (cuda_devices(rt) == 0 || !Fake()) return;  // a GPU has no armed fault in our own kernel
  }
  SUBCASE("asked until it ends") { run_child("--queued-fault-child", "asking"); }
  SUBCASE("waited for while it waits its turn") { run_child("--queued-fault-child", "waiting"); }
}
