// OpenCL's loader and the CUDA driver's thread-specific data. A library opened in a
// link-map namespace of its own has its own libc, whose pthread keys are numbered
// from 0 again but whose values go into the same per-thread slots as the process's:
// on an H100 machine PoCL opened so overwrote libcuda's and crashed it. The fake
// driver keeps its context stack under a key as the real one does, and refuses a
// slot it did not fill (tests/cuda/fake_driver.cpp, context_stack).
#include <dlfcn.h>

#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "opencl/loader.hpp"
#include "tests/cuda/cuda_helpers.hpp"

using namespace test;
using abr::opencl::NamespacePolicy;

namespace {

// tests/cuda/key_neighbour, opened as OpenCL's loader would be under `policy`.
struct KeyNeighbour {
  abr::opencl::OpenedLoader opened;
  int (*fill)() = nullptr;
  void (*clear)() = nullptr;
  explicit KeyNeighbour(NamespacePolicy policy) {
    std::string reason;
    if (policy == NamespacePolicy::Private) {  // by hand: the loader refuses it beside the CUDA driver
      opened.handle = dlmopen(LM_ID_NEWLM, ABR_KEY_NEIGHBOUR_PATH, RTLD_NOW | RTLD_LOCAL);
      opened.private_namespace = opened.handle != nullptr;
      reason = opened.handle ? "" : dlerror();
    } else {
      opened = abr::opencl::open_loader(ABR_KEY_NEIGHBOUR_PATH, policy, &reason);
    }
    REQUIRE_MESSAGE(opened.handle, reason);
    fill = reinterpret_cast<int (*)()>(dlsym(opened.handle, "key_neighbour_fill"));
    clear = reinterpret_cast<void (*)()>(dlsym(opened.handle, "key_neighbour_clear"));
    REQUIRE((fill && clear));
  }
  // A namespace's libc stays until exit: closing it is not safe while its keys exist.
  ~KeyNeighbour() {
    if (!opened.private_namespace) dlclose(opened.handle);
  }
};

// Puts the neighbour's slots back however the test ends.
struct Filled {
  KeyNeighbour& neighbour;
  int first_key;
  explicit Filled(KeyNeighbour& n) : neighbour(n), first_key(n.fill()) {}
  ~Filled() { neighbour.clear(); }
};

// A round trip host -> cuda:0 -> host on this thread, values checked.
void round_trip(abr_runtime* rt, int32_t start) {
  std::vector<int32_t> data = iota(4096, start);
  Managed source(data.data(), i32, {4096});
  Owned device(copy_to(rt, &source.managed, cuda0, nullptr));
  std::vector<int32_t> back(4096);
  Managed into(back.data(), i32, {4096});
  REQUIRE(abr_copy(rt, &*device, &into.managed.dl_tensor, nullptr, nullptr) == ABR_OK);
  CHECK(back == data);
}

}  // namespace

TEST_CASE_FIXTURE(NoDriverFindings, "OpenCL's loader, opened as by default, keeps its keys off the CUDA driver's") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  round_trip(rt, 1);  // the driver's context stack is in its slot on this thread
  KeyNeighbour neighbour(NamespacePolicy::Auto);
  CHECK_FALSE(neighbour.opened.private_namespace);  // no other LLVM here: the shared namespace
  CHECK(neighbour.opened.where == "in the shared namespace");
  Filled filled(neighbour);
  CHECK(filled.first_key > 0);  // numbers of the process's own libc, after the driver's
  round_trip(rt, 2);            // before the fix: CUDA_ERROR_INVALID_CONTEXT on the fake, a crash on an H100
}

TEST_CASE_FIXTURE(NoDriverFindings, "fake CUDA: a namespace's own libc overwriting the driver's key is refused") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  RawDriver raw;
  if (!raw.fake) {
    MESSAGE("skipped: overwriting a real driver's thread-specific data would crash it, which is what this shows");
    return;
  }
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // Both keep this thread's data under pthread keys too: the stand-in's keys would
  // overwrite theirs (the hazard itself), and the sanitizer crashes.
  MESSAGE("skipped under a sanitizer: its own pthread keys would be overwritten too");
  return;
#endif
  const long long first_finding = raw.fake.stat("findings");
  // What the loader now refuses beside the CUDA driver (the next test), done by hand.
  KeyNeighbour neighbour(NamespacePolicy::Private);
  CHECK(neighbour.opened.private_namespace);
  CUdeviceptr memory = 0;
  REQUIRE(raw.alloc(&memory, 256) == CUDA_SUCCESS);
  {
    Filled filled(neighbour);
    CHECK(filled.first_key == 0);  // its own libc numbers from 0 again
    CUdeviceptr lost = 0;
    CHECK(raw.alloc(&lost, 256) == CUDA_ERROR_INVALID_CONTEXT);
  }
  const std::string findings = raw.take_findings(first_finding);
  CHECK(findings.find("which the driver did not put there: a library in another link-map namespace") !=
        std::string::npos);
  CHECK(raw.free(memory) == CUDA_SUCCESS);  // the slot back, the context stack with it
}

TEST_CASE_FIXTURE(NoDriverFindings, "beside the CUDA driver a namespace of its own is refused, not crashed") {
  Runtime rt;
  if (!cuda_devices(rt)) return;  // the driver loaded: what a namespace of its own would break
  void* llvm = dlopen(ABR_FAKE_LLVM_PATH, RTLD_NOW | RTLD_GLOBAL);  // as TensorFlow's is
  REQUIRE_MESSAGE(llvm, dlerror());
  std::string reason;
  const abr::opencl::OpenedLoader opened =
      abr::opencl::open_loader(ABR_KEY_NEIGHBOUR_PATH, NamespacePolicy::Auto, &reason);
  dlclose(llvm);
  CHECK(opened.handle == nullptr);
  CHECK(reason ==
        "not opened: libfake-llvm.so's LLVM would crash PoCL in the shared namespace, and in a namespace of its own "
        "the drivers' libc would overwrite the CUDA driver's pthread keys, which crashes it");
  // Asked for by name, refused too, with the way out.
  const abr::opencl::OpenedLoader asked =
      abr::opencl::open_loader(ABR_KEY_NEIGHBOUR_PATH, NamespacePolicy::Private, &reason);
  CHECK(asked.handle == nullptr);
  CHECK(reason.find(
            "not opened: in a namespace of its own, which ARRAYBRIDGE_OPENCL_NAMESPACE=private asks for, the "
            "drivers' libc would overwrite the CUDA driver's pthread keys, which crashes it; unset it to open ") == 0);
}

TEST_CASE("after a namespace of its own, the CUDA driver is not loaded") {
  std::string reason;
  CHECK(abr::cuda::load_driver("libcuda.so.1", "libOpenCL.so.1 (in a link-map namespace of its own)", &reason) ==
        nullptr);
  CHECK(reason ==
        "the CUDA driver is not loaded beside libOpenCL.so.1 (in a link-map namespace of its own): that namespace's "
        "own libc would overwrite the driver's pthread keys, which crashes it");
}
