// libFuzzer target over abr_ipc_import against the fake CUDA driver: any bytes, of
// any size, as a CUDA IPC handle. Traps when an import that the handle's checks
// (cuda/ipc_handle.hpp) refuse made a driver call or returned anything but
// ABR_ERR_INVALID_ARGUMENT, or when an import succeeds that they refuse; crashes,
// hangs and leaks are the sanitizers' and libFuzzer's to find.
//
// The first input byte picks what the rest is (most mutations of a handle break
// its checksum, so two modes mend that to fuzz the checks behind it):
//   0: the handle as it is;
//   1: its checksum computed again;
//   2: its exporter made this process (pid and start time), checksum computed again,
//      so that handles saved by an earlier run import past the exporter's check.
// FUZZ_IPC_SEEDS=DIR writes valid handles of tensors this process exports (and
// keeps) into DIR at start, one per mode, for the run script to pass as a corpus.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <arraybridge/arraybridge.h>

#include "cuda/ipc_handle.hpp"
#include "lib/base/error.hpp"
#include "lib/platform/process_identity.hpp"

namespace {

enum Mode : uint8_t { kAsIs, kChecksumMended, kExporterMended, kModes };

void require(bool ok) {
  if (!ok) __builtin_trap();
}

abr_runtime* runtime = nullptr;
// The seeds' tensors, kept for the run (a plain array: no destructor at exit, so
// LeakSanitizer still finds them reachable).
DLManagedTensorVersioned* exported[8];
int exported_count = 0;
long long (*fake_stat)(const char*) = nullptr;

// Every driver call so far: the fake's counter, as tests/cuda/cuda_helpers.hpp reads it.
long long driver_calls() { return fake_stat("calls:"); }

// Exports a CUDA tensor of `shape` (strided when `strides`), made from host values,
// and writes its handle into `folder` once per mode. The tensor is kept for the run.
void write_seed(const std::string& folder, const std::string& name, DLDevice device, std::vector<int64_t> shape,
                std::vector<int64_t> strides, uint64_t byte_offset) {
  std::vector<float> values(4096, 1.0f);
  int64_t length = 4096;
  DLManagedTensorVersioned source{};
  source.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  source.dl_tensor = {values.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &length, nullptr, 0};
  DLManagedTensorVersioned* moved = nullptr;
  require(abr_to_device(runtime, &source, device, nullptr, nullptr, &moved) == ABR_OK);
  require(exported_count < 8);
  exported[exported_count++] = moved;
  DLTensor view = moved->dl_tensor;
  view.ndim = static_cast<int32_t>(shape.size());
  view.shape = shape.data();
  view.strides = strides.empty() ? nullptr : strides.data();
  view.byte_offset = byte_offset;
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  if (abr_ipc_export(runtime, &view, nullptr, &handle) != ABR_OK) {
    std::fprintf(stderr, "fuzz-ipc-import: exporting seed %s failed: %s\n", name.c_str(), abr_last_error());
    std::abort();
  }
  for (uint8_t mode = 0; mode < kModes; ++mode) {
    const std::string path = folder + "/" + name + "-mode" + std::to_string(mode);
    FILE* file = std::fopen(path.c_str(), "wb");
    require(file != nullptr);
    require(std::fwrite(&mode, 1, 1, file) == 1 && std::fwrite(handle.data, 1, handle.size, file) == handle.size);
    std::fclose(file);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("ARRAYBRIDGE_CUDA_LIBRARY", ABR_FAKE_CUDA_PATH, /*overwrite=*/0);
  abr_runtime_options options = ABR_RUNTIME_OPTIONS_INIT;
  options.flags = ABR_RUNTIME_DISABLE_OPENCL;  // CUDA (the fake) is the only backend with IPC
  if (abr_runtime_create(&options, &runtime) != ABR_OK) {
    std::fprintf(stderr, "fuzz-ipc-import: no runtime: %s\n", abr_last_error());
    std::abort();
  }
  abr_log_set_level(ABR_LOG_OFF);
  void* fake = dlopen(getenv("ARRAYBRIDGE_CUDA_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
  fake_stat = fake ? reinterpret_cast<long long (*)(const char*)>(dlsym(fake, "fake_cuda_stat")) : nullptr;
  struct abr_backend_info cuda = ABR_BACKEND_INFO_INIT;
  const int devices = abr_backend_info(runtime, ABR_BACKEND_CUDA, &cuda) == ABR_OK ? cuda.device_count : 0;
  if (!fake_stat || devices == 0) {
    std::fprintf(stderr, "fuzz-ipc-import: the fake CUDA driver (%s) is not the one loaded, or has no device\n",
                 getenv("ARRAYBRIDGE_CUDA_LIBRARY"));
    std::abort();
  }
  if (const char* seeds = getenv("FUZZ_IPC_SEEDS")) {
    write_seed(seeds, "vector", {kDLCUDA, 0}, {4096}, {}, 0);
    write_seed(seeds, "strided-inner-view", {kDLCUDA, 0}, {16, 8}, {64, 2}, 40);
    write_seed(seeds, "second-gpu", {kDLCUDA, devices > 1 ? 1 : 0}, {2, 3, 4}, {}, 0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t mode = size > 0 ? data[0] % kModes : kAsIs;
  const uint8_t* bytes = size > 0 ? data + 1 : data;
  const std::size_t length = size > 0 ? size - 1 : 0;

  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  std::memcpy(handle.data, bytes, std::min<std::size_t>(length, sizeof handle.data));
  handle.size = static_cast<uint32_t>(std::min<std::size_t>(length, UINT32_MAX));  // may exceed data: refused
  const bool fits = length <= sizeof handle.data;
  if (fits && mode == kExporterMended && length >= sizeof(abr::cuda::IpcHandleBody)) {
    const int32_t pid = static_cast<int32_t>(getpid());
    const uint64_t started = abr::process_start_time(pid).value_or(0);
    std::memcpy(handle.data + offsetof(abr::cuda::IpcHandleBody, exporter_pid), &pid, sizeof pid);
    std::memcpy(handle.data + offsetof(abr::cuda::IpcHandleBody, exporter_start), &started, sizeof started);
  }
  if (fits && mode != kAsIs) abr::cuda::seal_ipc_handle(handle.data, handle.size);

  bool valid = fits;
  if (fits) {
    try {
      abr::cuda::read_ipc_handle(handle.data, handle.size);
    } catch (const abr::Error&) {
      valid = false;
    }
  }

  const long long calls_before = driver_calls();
  DLManagedTensorVersioned* out = nullptr;
  const abr_status status = abr_ipc_import(runtime, &handle, nullptr, &out);
  if (status == ABR_OK) {
    require(valid && out != nullptr);
    out->deleter(out);
  } else {
    require(out == nullptr && abr_last_error()[0] != '\0');
  }
  const long long calls = driver_calls() - calls_before;
  if (!valid && (status != ABR_ERR_INVALID_ARGUMENT || calls != 0)) {
    std::fprintf(stderr, "fuzz-ipc-import: a handle the checks refuse got status %d after %lld driver call(s): %s\n",
                 status, calls, abr_last_error());
    __builtin_trap();
  }
  abr_clear_error();
  return 0;
}
