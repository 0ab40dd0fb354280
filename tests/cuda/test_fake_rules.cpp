// The fake driver's own rules, driven through its entry points as another
// library would call them: each misuse the H100 and compute-sanitizer taught us
// about is a finding, and the correct sequence next to it is not. (The rules
// catching the library itself are the CUDA tests' fixture, NoDriverFindings.)
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"
#include "tests/support/process.hpp"

using namespace test;

namespace {

// The fake is loaded by the first runtime; without it (a real driver) these skip.
bool fake_loaded() {
  Runtime rt;
  if (!cuda_devices(rt)) return false;
  Fake fake;
  if (!fake) MESSAGE("a real CUDA driver: the fake's own rules are not exercised");
  return static_cast<bool>(fake);
}

}  // namespace

TEST_CASE("fake driver: stream-ordered memory used or freed on an unordered stream is a finding; events order it") {
  if (!fake_loaded()) return;
  RawDriver cu;
  CUstream a = cu.stream(), b = cu.stream();
  std::vector<char> host(256, 1);
  CUdeviceptr ptr = 0;

  long long before = cu.fake.stat("findings");
  REQUIRE(cu.alloc_async(&ptr, 256, a) == CUDA_SUCCESS);
  REQUIRE(cu.upload(ptr, host.data(), 256, b) == CUDA_SUCCESS);  // b knows nothing of the allocation
  cu.stream_sync(a);  // a host synchronize is no stream order (as memcheck judged it on the H100)
  REQUIRE(cu.free_async(ptr, a) == CUDA_SUCCESS);  // and a's free is not ordered after b's use
  std::string found = cu.take_findings(before);
  CHECK(found.find("use-before-alloc") != std::string::npos);
  CHECK(found.find("use-after-free") != std::string::npos);

  before = cu.fake.stat("findings");
  REQUIRE(cu.alloc_async(&ptr, 256, a) == CUDA_SUCCESS);
  cu.order(a, b);
  REQUIRE(cu.upload(ptr, host.data(), 256, b) == CUDA_SUCCESS);
  cu.order(b, a);
  REQUIRE(cu.free_async(ptr, a) == CUDA_SUCCESS);
  CHECK(cu.take_findings(before).empty());

  before = cu.fake.stat("findings");
  REQUIRE(cu.alloc_async(&ptr, 256, a) == CUDA_SUCCESS);
  REQUIRE(cu.free_async(ptr, a) == CUDA_SUCCESS);
  CHECK(cu.upload(ptr, host.data(), 256, a) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cu.take_findings(before).find("use-after-free") != std::string::npos);
  cu.stream_destroy(a);
  cu.stream_destroy(b);
}

TEST_CASE("fake driver: cuMemFree while another stream's queued work uses the memory is a finding") {
  if (!fake_loaded()) return;
  RawDriver cu;
  CUstream consumer = cu.stream();
  CUdeviceptr src = 0, dst = 0;
  REQUIRE(cu.alloc(&src, 4096) == CUDA_SUCCESS);
  REQUIRE(cu.alloc(&dst, 4096) == CUDA_SUCCESS);
  cu.fake.control("delay_us", 20000);  // the consumer lags
  long long before = cu.fake.stat("findings");
  REQUIRE(cu.device_copy(dst, src, 4096, consumer) == CUDA_SUCCESS);
  REQUIRE(cu.free(src) == CUDA_SUCCESS);  // the copy has not run yet
  cu.stream_sync(consumer);
  cu.fake.control("reset", 0);  // the late copy read freed memory: a sticky fault, as on a GPU
  CHECK(cu.take_findings(before).find("still queued") != std::string::npos);

  REQUIRE(cu.alloc(&src, 4096) == CUDA_SUCCESS);
  cu.fake.control("delay_us", 20000);
  before = cu.fake.stat("findings");
  REQUIRE(cu.device_copy(dst, src, 4096, consumer) == CUDA_SUCCESS);
  REQUIRE(cu.sync_context() == CUDA_SUCCESS);  // every stream of the context has drained
  REQUIRE(cu.free(src) == CUDA_SUCCESS);
  cu.fake.control("delay_us", 0);
  CHECK(cu.take_findings(before).empty());
  CHECK(cu.free(dst) == CUDA_SUCCESS);
  cu.stream_destroy(consumer);
}

TEST_CASE("fake driver: frees without a current context, or after the context is gone, are findings") {
  if (!fake_loaded()) return;
  RawDriver cu;
  void* pinned = nullptr;
  REQUIRE(cu.host_alloc(&pinned, 4096, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS);
  long long before = cu.fake.stat("findings");
  CUcontext popped = nullptr;
  REQUIRE(cu.pop(&popped) == CUDA_SUCCESS);
  CHECK(cu.free_host(pinned) == CUDA_ERROR_INVALID_CONTEXT);
  REQUIRE(cu.push(popped) == CUDA_SUCCESS);
  CHECK(cu.take_findings(before).find("no current context") != std::string::npos);
  CHECK(cu.free_host(pinned) == CUDA_SUCCESS);

  // A context of our own on cuda:1, released while its memory is still allocated.
  CUcontext other = nullptr;
  const long long retained = cu.fake.stat("retained:1");
  if (retained != 0) return;  // a runtime holds cuda:1: its context would outlive this test
  REQUIRE(cu.retain(&other, 1) == CUDA_SUCCESS);
  REQUIRE(cu.push(other) == CUDA_SUCCESS);
  REQUIRE(cu.host_alloc(&pinned, 4096, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS);
  REQUIRE(cu.pop(nullptr) == CUDA_SUCCESS);
  const long long pinned_before = cu.fake.stat("pinned_allocations");
  REQUIRE(cu.release(1) == CUDA_SUCCESS);  // the last reference: the driver frees the block
  CHECK(cu.fake.stat("pinned_allocations") == pinned_before - 1);
  before = cu.fake.stat("findings");
  CHECK(cu.free_host(pinned) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cu.take_findings(before).find("after the primary context") != std::string::npos);
}

TEST_CASE("fake driver: cuPointerGetAttribute on pageable memory is a finding, cuPointerGetAttributes is not") {
  if (!fake_loaded()) return;
  RawDriver cu;
  std::vector<char> pageable(64);
  const auto address = reinterpret_cast<CUdeviceptr>(pageable.data());
  unsigned int type = 99;
  long long before = cu.fake.stat("findings");
  CHECK(cu.attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cu.take_findings(before).find("cuPointerGetAttribute(") != std::string::npos);

  before = cu.fake.stat("findings");
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  size_t size = 99;
  void* values[] = {&type, &size};
  CHECK(cu.attributes(2, which, values, address) == CUDA_SUCCESS);
  CHECK(type == 0);  // unknown to the driver: every attribute reads as zero
  CHECK(size == 0);
  CHECK(cu.take_findings(before).empty());
}

TEST_CASE(
    "fake driver: cuMemHostRegister as on the H100; unregistering under a queued copy, without a context or after it, "
    "are findings") {
  if (!fake_loaded()) return;
  RawDriver cu;
  void* allocated = nullptr;
  REQUIRE(cu.host_alloc(&allocated, 4096, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS);
  CHECK(cu.host_register(allocated, 4096, CU_MEMHOSTREGISTER_PORTABLE) ==
        CUDA_ERROR_INVALID_VALUE);  // already page-locked
  REQUIRE(cu.free_host(allocated) == CUDA_SUCCESS);

  // Pageable memory: an async copy from it is counted until it is registered.
  std::vector<char> host(8192, 7);
  CUdeviceptr device = 0;
  REQUIRE(cu.alloc(&device, host.size()) == CUDA_SUCCESS);
  CUstream stream = cu.stream();
  const long long pageable = cu.fake.stat("pageable_async_copies");
  REQUIRE(cu.upload(device, host.data(), host.size(), stream) == CUDA_SUCCESS);
  CHECK(cu.fake.stat("pageable_async_copies") == pageable + 1);
  const long long registered = cu.fake.stat("registered_ranges");
  REQUIRE(cu.host_register(host.data(), host.size(), CU_MEMHOSTREGISTER_PORTABLE) == CUDA_SUCCESS);
  CHECK(cu.fake.stat("registered_ranges") == registered + 1);
  CHECK(cu.host_register(host.data() + 4096, 16, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  REQUIRE(cu.upload(device, host.data(), host.size(), stream) == CUDA_SUCCESS);
  CHECK(cu.fake.stat("pageable_async_copies") == pageable + 1);

  // Unregistered while that copy is still queued behind a lagging stream.
  long long before = cu.fake.stat("findings");
  cu.fake.control("delay_us", 20000);
  REQUIRE(cu.upload(device, host.data(), host.size(), stream) == CUDA_SUCCESS);
  CHECK(cu.host_unregister(host.data()) == CUDA_SUCCESS);
  REQUIRE(cu.stream_sync(stream) == CUDA_SUCCESS);
  cu.fake.control("delay_us", 0);
  CHECK(cu.take_findings(before).find("still uses the memory") != std::string::npos);
  CHECK(cu.host_unregister(host.data()) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

  // Without a current context.
  REQUIRE(cu.host_register(host.data(), host.size(), 0) == CUDA_SUCCESS);
  before = cu.fake.stat("findings");
  CUcontext popped = nullptr;
  REQUIRE(cu.pop(&popped) == CUDA_SUCCESS);
  CHECK(cu.host_unregister(host.data()) == CUDA_ERROR_INVALID_CONTEXT);
  REQUIRE(cu.push(popped) == CUDA_SUCCESS);
  CHECK(cu.take_findings(before).find("no current context") != std::string::npos);
  CHECK(cu.host_unregister(host.data()) == CUDA_SUCCESS);  // the correct sequence: no finding
  CHECK(cu.fake.stat("findings") == before);
  CHECK(cu.fake.stat("registered_ranges") == registered);
  REQUIRE(cu.stream_destroy(stream) == CUDA_SUCCESS);
  REQUIRE(cu.free(device) == CUDA_SUCCESS);

  // After the context that registered it was released: the driver ended it then.
  if (cu.fake.stat("retained:1") != 0) return;  // a runtime holds cuda:1: its context would outlive this test
  CUcontext other = nullptr;
  REQUIRE(cu.retain(&other, 1) == CUDA_SUCCESS);
  REQUIRE(cu.push(other) == CUDA_SUCCESS);
  REQUIRE(cu.host_register(host.data(), host.size(), 0) == CUDA_SUCCESS);
  REQUIRE(cu.pop(nullptr) == CUDA_SUCCESS);
  REQUIRE(cu.release(1) == CUDA_SUCCESS);
  CHECK(cu.fake.stat("registered_ranges") == registered);
  before = cu.fake.stat("findings");
  CHECK(cu.host_unregister(host.data()) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  CHECK(cu.take_findings(before).find("after the primary context") != std::string::npos);
}

TEST_CASE("fake driver: CUDA IPC exports whole cuMemAlloc allocations only, and never opens in the exporting process") {
  if (!fake_loaded()) return;
  RawDriver cu;
  CUstream stream = cu.stream();
  CUdeviceptr plain = 0, pooled = 0;
  REQUIRE(cu.alloc(&plain, 256) == CUDA_SUCCESS);
  REQUIRE(cu.alloc_async(&pooled, 256, stream) == CUDA_SUCCESS);
  cu.stream_sync(stream);
  CUipcMemHandle handle;
  const long long before = cu.fake.stat("findings");
  CHECK(cu.ipc_get(&handle, plain) == CUDA_SUCCESS);
  CHECK(cu.take_findings(before).empty());
  CUipcMemHandle from_pool;  // refused as on the H100, and a finding: compute-sanitizer reports the call
  CHECK(cu.ipc_get(&from_pool, pooled) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cu.take_findings(before).find("stream-ordered pool has no IPC handle") != std::string::npos);
  CUipcMemHandle inner;
  CHECK(cu.ipc_get(&inner, plain + 64) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cu.take_findings(before).find("not the base of an allocation") != std::string::npos);
  CUdeviceptr opened = 0;
  CHECK(cu.ipc_open(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_ERROR_INVALID_CONTEXT);
  CHECK(cu.take_findings(before).find("exported by this same process") != std::string::npos);
  REQUIRE(cu.free(plain) == CUDA_SUCCESS);
  REQUIRE(cu.free_async(pooled, stream) == CUDA_SUCCESS);
  cu.stream_sync(stream);
  cu.stream_destroy(stream);
}

// The other process of the next test (this binary run with --raw-ipc-open HEX): opens
// the driver handle HEX through the driver's own entry points, as another library
// would, closes it again if it opened, and prints the status cuIpcOpenMemHandle gave.
int raw_ipc_open_child_main(const char* hex) {
  void* cuda = dlopen(std::getenv("ARRAYBRIDGE_CUDA_LIBRARY"), RTLD_NOW | RTLD_LOCAL);
  if (!cuda || std::strlen(hex) != 2 * sizeof(CUipcMemHandle)) return 2;
  CUipcMemHandle handle;
  for (std::size_t i = 0; i < sizeof handle.reserved; ++i) {
    unsigned byte = 0;
    if (std::sscanf(hex + 2 * i, "%2x", &byte) != 1) return 2;
    handle.reserved[i] = static_cast<char>(byte);
  }
  const auto symbol = [&](const char* name) { return dlsym(cuda, name); };
  const auto init = reinterpret_cast<decltype(&cuInit)>(symbol("cuInit"));
  const auto retain =
      reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(symbol(ABR_TEST_CUDA_SYMBOL(cuDevicePrimaryCtxRetain)));
  const auto push = reinterpret_cast<decltype(&cuCtxPushCurrent)>(symbol(ABR_TEST_CUDA_SYMBOL(cuCtxPushCurrent)));
  const auto open = reinterpret_cast<decltype(&cuIpcOpenMemHandle)>(symbol(ABR_TEST_CUDA_SYMBOL(cuIpcOpenMemHandle)));
  const auto close =
      reinterpret_cast<decltype(&cuIpcCloseMemHandle)>(symbol(ABR_TEST_CUDA_SYMBOL(cuIpcCloseMemHandle)));
  CUcontext context = nullptr;
  CUdeviceptr opened = 0;
  if (!init || !retain || !push || !open || !close || init(0) != CUDA_SUCCESS || retain(&context, 0) != CUDA_SUCCESS ||
      push(context) != CUDA_SUCCESS)
    return 3;
  const CUresult status = open(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (status == CUDA_SUCCESS && close(opened) != CUDA_SUCCESS) return 4;
  std::printf("%d\n", static_cast<int>(status));
  return 0;
}

namespace {

// What cuIpcOpenMemHandle gives `handle` in another process (-1: the child failed).
int opened_elsewhere(const CUipcMemHandle& handle) {
  std::string text;
  for (const char byte : handle.reserved) {
    char pair[3];
    std::snprintf(pair, sizeof pair, "%02x", static_cast<unsigned char>(byte));
    text += pair;
  }
  int status = 0;
  const std::string printed = run_this_program({"--raw-ipc-open", text}, &status);
  INFO("child exit status " << status << ", printed " << printed);
  REQUIRE(status == 0);
  return std::atoi(printed.c_str());
}

}  // namespace

TEST_CASE("fake driver: an IPC handle to freed memory is refused, also once a new allocation reuses its place") {
  if (!fake_loaded()) return;
  RawDriver cu;
  CUdeviceptr first = 0, second = 0;
  REQUIRE(cu.alloc(&first, 8192) == CUDA_SUCCESS);
  CUipcMemHandle old_handle, new_handle;
  REQUIRE(cu.ipc_get(&old_handle, first) == CUDA_SUCCESS);
  CHECK(opened_elsewhere(old_handle) == CUDA_SUCCESS);  // live: it opens
  REQUIRE(cu.free(first) == CUDA_SUCCESS);
  CHECK(opened_elsewhere(old_handle) == CUDA_ERROR_INVALID_HANDLE);  // freed, its exporter alive: refused
  REQUIRE(cu.alloc(&second, 8192) == CUDA_SUCCESS);
  REQUIRE(second == first);                                          // the fake reuses the place (first fit)
  CHECK(opened_elsewhere(old_handle) == CUDA_ERROR_INVALID_HANDLE);  // another allocation's now: still refused
  REQUIRE(cu.ipc_get(&new_handle, second) == CUDA_SUCCESS);
  CHECK(opened_elsewhere(new_handle) == CUDA_SUCCESS);
  REQUIRE(cu.free(second) == CUDA_SUCCESS);
}
