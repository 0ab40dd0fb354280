// CUDA IPC through the C API: what can be exported and what is refused (host
// memory, stream-ordered pool memory), handles that are no handles, an import in
// the exporting process itself, and an import in a child process that must wait
// for the exporter's lagging stream (this binary run with --ipc-child). Handles
// that fail a check (a changed byte, cut short, a newer writer, an exporter that
// exited, its pid reused) are refused before any driver call. The Python tests add
// multiprocessing, double imports and other GPUs.
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cuda/ipc_handle.hpp"
#include "lib/platform/process_identity.hpp"
#include "tests/cuda/cuda_helpers.hpp"
#include "tests/support/process.hpp"

using namespace test;

namespace {

// A host tensor of 0, 1, 2, ... moved to `device`.
DLManagedTensorVersioned* iota_on(abr_runtime* rt, DLDevice device, std::vector<int32_t>& host) {
  Managed source(host.data(), i32, {static_cast<int64_t>(host.size())});
  return move_to(rt, &source.managed, device);
}

std::string hex(const unsigned char* data, std::size_t size) {
  std::string out;
  char pair[3];
  for (std::size_t i = 0; i < size; ++i) {
    std::snprintf(pair, sizeof pair, "%02x", data[i]);
    out += pair;
  }
  return out;
}

// Exit codes of the child, each naming the step that went wrong.
enum IpcChildResult : int {
  kIpcPassed = 0,
  kIpcBadArguments = 30,
  kIpcNoRuntime,
  kIpcNotImported,
  kIpcStale,
  kIpcFindings,
  kIpcNotExported
};

abr_ipc_handle from_hex(const std::string& text) {
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  if (text.size() % 2 || text.size() / 2 > sizeof handle.data) return handle;
  handle.size = static_cast<uint32_t>(text.size() / 2);
  for (std::size_t i = 0; i < handle.size; ++i)
    handle.data[i] = static_cast<unsigned char>(std::stoi(text.substr(2 * i, 2), nullptr, 16));
  return handle;
}

// Every driver call so far (the fake counts them; 0 on a real driver).
long long driver_calls() {
  Fake fake;
  return fake ? fake.stat("calls:") : 0;
}

// Imports `handle`, expecting ABR_ERR_INVALID_ARGUMENT, no tensor and no driver
// call; returns the message.
std::string refused_without_driver_calls(abr_runtime* rt, const abr_ipc_handle& handle) {
  const long long before = driver_calls();
  DLManagedTensorVersioned* out = nullptr;
  const abr_status status = abr_ipc_import(rt, &handle, nullptr, &out);
  const std::string message = abr_last_error();
  INFO(message);
  CHECK(status == ABR_ERR_INVALID_ARGUMENT);
  CHECK(out == nullptr);
  CHECK(driver_calls() == before);
  return message;
}

// Sets a field of a handle's fixed part and computes its checksum again, as a
// writer of those bytes would have.
template <class T>
void rewrite(abr_ipc_handle& handle, std::size_t field_offset, T value) {
  std::memcpy(handle.data + field_offset, &value, sizeof value);
  abr::cuda::seal_ipc_handle(handle.data, handle.size);
}

// The handle a child process exported before it exited (the memory went with it).
abr_ipc_handle handle_of_exited_child() {
  int status = 0;
  const std::string text = run_this_program({"--ipc-child", "export"}, &status);
  INFO("export child exit status " << status);
  REQUIRE(status == kIpcPassed);
  const abr_ipc_handle handle = from_hex(text);
  REQUIRE(handle.size > 0);
  return handle;
}

// The child's side of handle_of_exited_child: exports a tensor, writes the handle
// in hex on stdout and exits.
int export_child_main() {
  abr_runtime_options options = ABR_RUNTIME_OPTIONS_INIT;
  options.flags = ABR_RUNTIME_DISABLE_OPENCL;
  abr_runtime* rt = nullptr;
  if (abr_runtime_create(&options, &rt) != ABR_OK) return kIpcNoRuntime;
  std::vector<int32_t> host(16, 5);
  Managed source(host.data(), i32, {16});
  DLManagedTensorVersioned* tensor = nullptr;
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  const bool exported = abr_to_device(rt, &source.managed, cuda0, nullptr, nullptr, &tensor) == ABR_OK &&
      abr_ipc_export(rt, &tensor->dl_tensor, nullptr, &handle) == ABR_OK;
  if (!exported) std::fprintf(stderr, "ipc export child: %s\n", abr_last_error());
  if (tensor) tensor->deleter(tensor);
  abr_runtime_destroy(rt);
  if (!exported) return kIpcNotExported;
  std::printf("%s", hex(handle.data, handle.size).c_str());
  return kIpcPassed;
}

}  // namespace

// The child's side (`--ipc-child export`: export_child_main's): imports the handle (argv[2], hex), reads the tensor
// without a stream (so the import itself waits for the exporter's queued work) and expects every element to be argv[3].
int ipc_child_main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[2], "export") == 0) return export_child_main();
  if (argc != 4) return kIpcBadArguments;
  const abr_ipc_handle handle = from_hex(argv[2]);
  if (handle.size == 0) return kIpcBadArguments;
  const int32_t expected = std::atoi(argv[3]);
  abr_runtime_options options = ABR_RUNTIME_OPTIONS_INIT;
  options.flags = ABR_RUNTIME_DISABLE_OPENCL;  // starts in milliseconds: well inside the exporter's lag
  abr_runtime* rt = nullptr;
  if (abr_runtime_create(&options, &rt) != ABR_OK) return kIpcNoRuntime;
  DLManagedTensorVersioned* imported = nullptr;
  if (abr_ipc_import(rt, &handle, nullptr, &imported) != ABR_OK) {
    std::fprintf(stderr, "ipc child: %s\n", abr_last_error());
    return kIpcNotImported;
  }
  std::vector<int32_t> seen(static_cast<std::size_t>(imported->dl_tensor.shape[0]));
  Managed dst(seen.data(), i32, {imported->dl_tensor.shape[0]});
  const bool copied = abr_copy(rt, &imported->dl_tensor, &dst.tensor(), nullptr, nullptr) == ABR_OK;
  imported->deleter(imported);
  abr_runtime_destroy(rt);  // the mapping is closed by now
  for (int32_t value : seen)
    if (!copied || value != expected) return kIpcStale;
  Fake fake;
  return fake && fake.stat("findings") > 0 ? kIpcFindings : kIpcPassed;
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA IPC: a child process imports after the exporter's lagging stream, not before") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  Fake fake;
  if (!fake) return;  // the lag is the fake's
  std::vector<int32_t> zeros(4096, 0), sevens(4096, 7);
  Owned tensor(iota_on(rt, cuda0, zeros));
  Owned source(iota_on(rt, cuda0, sevens));
  Owned scratch(iota_on(rt, cuda0, zeros));
  RawDriver cu;
  CUstream lagging = cu.stream();
  abr_stream* wrapped = nullptr;
  REQUIRE(abr_stream_wrap(rt, cuda0, lagging, &wrapped) == ABR_OK);
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  {
    // 20 ms per operation: 49 copies into scratch memory, then the one writing the
    // values the child must see, 1 s later: far longer than the child needs to start.
    Lag lag(20000);
    for (int i = 0; i < 50; ++i)
      REQUIRE(cu.device_copy(reinterpret_cast<CUdeviceptr>((i < 49 ? scratch : tensor).t->dl_tensor.data),
                             reinterpret_cast<CUdeviceptr>(source.t->dl_tensor.data), 4096 * sizeof(int32_t),
                             lagging) == CUDA_SUCCESS);
    const auto started = std::chrono::steady_clock::now();
    REQUIRE(abr_ipc_export(rt, &tensor.t->dl_tensor, wrapped, &handle) == ABR_OK);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::milliseconds(700));  // no wait for the lag

    int status = 0;
    run_this_program({"--ipc-child", hex(handle.data, handle.size), "7"}, &status);
    INFO("child exit status " << status
                              << " (30 arguments, 31 runtime, 32 not imported, 33 read before the exporter's "
                                 "stream finished, 34 fake driver findings; 23 is LeakSanitizer's)");
    CHECK(status == kIpcPassed);
  }
  abr_stream_destroy(wrapped);
  cu.stream_destroy(lagging);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA IPC: a handle of our tensor, imported in the same process, views its memory") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  std::vector<int32_t> host = iota(1000);
  Owned tensor(iota_on(rt, cuda0, host));
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  REQUIRE(abr_ipc_export(rt, &tensor.t->dl_tensor, nullptr, &handle) == ABR_OK);
  CHECK(handle.size > 0);
  CHECK(handle.size <= ABR_IPC_HANDLE_BYTES);
  DLManagedTensorVersioned* imported = nullptr;
  REQUIRE(abr_ipc_import(rt, &handle, nullptr, &imported) == ABR_OK);
  Owned view(imported);
  CHECK(view->data == tensor->data);
  CHECK(view->device.device_type == kDLCUDA);
  CHECK(view->shape[0] == 1000);
  CHECK(read_back(rt, view.t->dl_tensor) == host);
  view.reset();  // the view owns nothing: the exporter's tensor is still whole
  CHECK(read_back(rt, tensor.t->dl_tensor) == host);
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA IPC: a view inside an allocation exports the allocation and its offset") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  const DLDevice last = cuda_devices(rt) > 1 ? cuda1 : cuda0;  // the fake has two GPUs, an H100 machine one
  std::vector<int32_t> host = iota(64);
  Owned tensor(iota_on(rt, last, host));
  // Elements 10, 12, ..., 40: a strided view starting inside the allocation.
  DLTensor inner = tensor.t->dl_tensor;
  int64_t shape[] = {16}, strides[] = {2};
  inner.shape = shape;
  inner.strides = strides;
  inner.byte_offset = 10 * sizeof(int32_t);
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  REQUIRE(abr_ipc_export(rt, &inner, nullptr, &handle) == ABR_OK);  // the fake refuses a non-base pointer
  DLManagedTensorVersioned* imported = nullptr;
  REQUIRE(abr_ipc_import(rt, &handle, nullptr, &imported) == ABR_OK);
  Owned view(imported);
  CHECK(view->device.device_id == last.device_id);
  CHECK(static_cast<char*>(view->data) + view->byte_offset == static_cast<char*>(tensor->data) + 10 * sizeof(int32_t));
  REQUIRE(view->strides);
  CHECK(view->strides[0] == 2);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA IPC: host memory, OpenCL and stream-ordered pool memory are refused by name") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  std::vector<int32_t> host = iota(16);
  Managed on_host(host.data(), i32, {16});
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  CHECK(abr_ipc_export(rt, &on_host.tensor(), nullptr, &handle) == ABR_ERR_UNSUPPORTED);
  CHECK(std::string(abr_last_error()).find("cpu is host memory") != std::string::npos);
  Owned pinned(iota_on(rt, cuda_host, host));
  CHECK(abr_ipc_export(rt, &pinned.t->dl_tensor, nullptr, &handle) == ABR_ERR_UNSUPPORTED);
  CHECK(std::string(abr_last_error()).find("cuda_host is host memory") != std::string::npos);

  RawDriver cu;
  CUstream stream = cu.stream();
  CUdeviceptr pool = 0;
  REQUIRE(cu.alloc_async(&pool, 64, stream) == CUDA_SUCCESS);
  cu.stream_sync(stream);
  Managed pooled(reinterpret_cast<void*>(pool), i32, {16}, {}, 0, cuda0);
  CHECK(abr_ipc_export(rt, &pooled.tensor(), nullptr, &handle) == ABR_ERR_UNSUPPORTED);
  CHECK(std::string(abr_last_error()).find("stream-ordered pool") != std::string::npos);
  CHECK(abr_last_error_backend_code() == 0);  // refused before asking the driver (sanitizers report its refusal)
  CHECK(handle.size == 0);                    // nothing written on failure
  REQUIRE(cu.free_async(pool, stream) == CUDA_SUCCESS);
  cu.stream_sync(stream);
  cu.stream_destroy(stream);
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA IPC: handles that are not handles, and bad arguments, are named") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  std::vector<int32_t> host = iota(8);
  Owned tensor(iota_on(rt, cuda0, host));
  abr_ipc_handle unset{};
  CHECK(abr_ipc_export(rt, &tensor.t->dl_tensor, nullptr, &unset) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("abr_ipc_handle.version is 0") != std::string::npos);
  CHECK(abr_ipc_export(rt, nullptr, nullptr, &unset) == ABR_ERR_INVALID_ARGUMENT);

  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  REQUIRE(abr_ipc_export(rt, &tensor.t->dl_tensor, nullptr, &handle) == ABR_OK);
  DLManagedTensorVersioned* out = nullptr;
  abr_ipc_handle garbage = handle;
  garbage.data[0] ^= 0xff;
  CHECK(abr_ipc_import(rt, &garbage, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("not an IPC handle") != std::string::npos);
  abr_ipc_handle truncated = handle;
  truncated.size -= 8;  // the strides' last element is cut off
  CHECK(abr_ipc_import(rt, &truncated, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("damaged") != std::string::npos);
  abr_ipc_handle oversized = handle;
  oversized.size = ABR_IPC_HANDLE_BYTES + 1;
  CHECK(abr_ipc_import(rt, &oversized, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(out == nullptr);
  DLTensor empty = tensor.t->dl_tensor;
  int64_t none[] = {0};
  empty.shape = none;
  empty.strides = nullptr;
  CHECK(abr_ipc_export(rt, &empty, nullptr, &handle) == ABR_ERR_UNSUPPORTED);
  CHECK(std::string(abr_last_error()).find("no memory to share") != std::string::npos);
  abr_ipc_handle init_me;
  CHECK(abr_ipc_handle_init(&init_me, ABR_IPC_HANDLE_VERSION) == ABR_OK);
  CHECK(init_me.version == ABR_IPC_HANDLE_VERSION);
  CHECK(init_me.size == 0);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA IPC: a handle with any one byte changed, or cut short, is refused before "
                  "any driver call") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  std::vector<int32_t> host = iota(64);
  Owned tensor(iota_on(rt, cuda0, host));
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  REQUIRE(abr_ipc_export(rt, &tensor.t->dl_tensor, nullptr, &handle) == ABR_OK);
  REQUIRE(handle.size == sizeof(abr::cuda::IpcHandleBody) + 2 * sizeof(int64_t));
  const std::size_t magic_end = offsetof(abr::cuda::IpcPrefix, format);
  for (unsigned char flip : {0x01, 0x80}) {
    for (std::size_t at = 0; at < handle.size; ++at) {
      CAPTURE(at);
      abr_ipc_handle changed = handle;
      changed.data[at] ^= flip;
      const std::string message = refused_without_driver_calls(rt, changed);
      CHECK(message.find(at < magic_end
                             ? "are not an IPC handle from abr_ipc_export"
                             : "the IPC handle is damaged: its checksum does not match") != std::string::npos);
    }
  }
  for (uint32_t size = 0; size < handle.size; ++size) {
    CAPTURE(size);
    abr_ipc_handle cut = handle;
    cut.size = size;
    const std::string message = refused_without_driver_calls(rt, cut);
    CHECK(message.find(size < sizeof(abr::cuda::IpcPrefix) ? "not an IPC handle" : "checksum does not match") !=
          std::string::npos);
  }
  DLManagedTensorVersioned* imported = nullptr;  // the handle itself still opens
  REQUIRE(abr_ipc_import(rt, &handle, nullptr, &imported) == ABR_OK);
  Owned view(imported);
  CHECK(read_back(rt, view.t->dl_tensor) == host);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA IPC: a handle from a newer or older arraybridge is refused naming both "
                  "versions") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  std::vector<int32_t> host = iota(8);
  Owned tensor(iota_on(rt, cuda0, host));
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  REQUIRE(abr_ipc_export(rt, &tensor.t->dl_tensor, nullptr, &handle) == ABR_OK);
  const std::string ours = abr_version_string();

  abr_ipc_handle newer = handle;
  const uint16_t version[3] = {0, 3, 1};
  std::memcpy(newer.data + offsetof(abr::cuda::IpcPrefix, library), version, sizeof version);
  rewrite(newer, offsetof(abr::cuda::IpcPrefix, format), uint8_t{abr::cuda::kIpcFormat + 1});
  CHECK(refused_without_driver_calls(rt, newer) ==
        "abr_ipc_import: this IPC handle was written by arraybridge 0.3.1 (handle format 3); this library (" + ours +
            ") reads format 2: import it with the exporter's version or newer");

  // Format 1 had no checksum: its format byte alone names it.
  abr_ipc_handle older = handle;
  older.data[offsetof(abr::cuda::IpcPrefix, format)] = 1;
  CHECK(refused_without_driver_calls(rt, older).find("written by an older arraybridge (handle format 1); this "
                                                     "library (" +
                                                     ours + ") reads format 2") != std::string::npos);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA IPC: a handle whose exporter exited is refused before any driver call, "
                  "and so is one whose pid now names another process") {
  Runtime rt;
  if (cuda_devices(rt) == 0) return;
  const abr_ipc_handle handle = handle_of_exited_child();
  abr::cuda::IpcHandleBody body;
  std::memcpy(&body, handle.data, sizeof body);
  CAPTURE(body.exporter_pid);
  const std::string pid = std::to_string(body.exporter_pid);
  if (abr::process_start_time(body.exporter_pid)) return;  // the pid was taken again at once: nothing to check
  CHECK(refused_without_driver_calls(rt, handle) ==
        "abr_ipc_import: the process that exported this IPC handle (pid " + pid +
            ") has exited, and its memory with it");

  // The exporter's pid reused: our parent, and this process itself (which the
  // same-process path would otherwise take for the exporter and view its address).
  const std::size_t pid_at = offsetof(abr::cuda::IpcHandleBody, exporter_pid);
  for (int32_t reused : {static_cast<int32_t>(getppid()), static_cast<int32_t>(getpid())}) {
    CAPTURE(reused);
    abr_ipc_handle taken = handle;
    rewrite(taken, pid_at, reused);
    const std::string message = refused_without_driver_calls(rt, taken);
    const std::string named = std::to_string(reused);
    CHECK(message.find("the process that exported this IPC handle (pid " + named + ", started ") != std::string::npos);
    CHECK(message.find("has exited, and its memory with it; pid " + named + " is now another process (started ") !=
          std::string::npos);
  }
}

TEST_CASE("CUDA IPC: a process's start time is field 22 of /proc/PID/stat, counted after the last ')'") {
  using abr::parse_start_time;
  const std::string fields = " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4545768 3133440 365";
  CHECK(parse_start_time("5048 (cat)" + fields) == 4545768u);
  CHECK(parse_start_time("5048 (a) b) (c d)" + fields) == 4545768u);  // a command name may hold both
  CHECK(parse_start_time("5048 ()" + fields) == 4545768u);
  CHECK(parse_start_time("5048 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 77") == 77u);
  CHECK_FALSE(parse_start_time("5048 cat" + fields));                                             // no ')'
  CHECK_FALSE(parse_start_time("5048 (cat) S 1 2 3"));                                            // too few fields
  CHECK_FALSE(parse_start_time("5048 (cat) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -4"));  // not a number
  CHECK_FALSE(parse_start_time("5048 (cat) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 99999999999999999999"));
  CHECK_FALSE(parse_start_time(""));

  std::ifstream own("/proc/self/stat");
  const std::string line((std::istreambuf_iterator<char>(own)), std::istreambuf_iterator<char>());
  REQUIRE(parse_start_time(line));
  CHECK(abr::process_start_time(static_cast<int32_t>(getpid())) == parse_start_time(line));
  CHECK(abr::process_start_time(static_cast<int32_t>(getppid())));
  CHECK_FALSE(abr::process_start_time(0));
  CHECK_FALSE(abr::process_start_time(-1));
}
