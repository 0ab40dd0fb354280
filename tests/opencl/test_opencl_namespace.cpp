// The ICD loader in a link-map namespace of its own (opencl/loader.hpp), on PoCL:
// a second copy of the driver that works, whose devices are matched to the shared
// copy's by key; the shared namespace by default, a namespace of its own when
// another LLVM makes it necessary; and the refusals that replace a crash.
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "lib/platform/link_namespaces.hpp"
#include "opencl/api.hpp"
#include "opencl/discovery.hpp"
#include "opencl/loader.hpp"
#include "tests/support/opencl_helpers.hpp"

using namespace test;
using abr::opencl::NamespacePolicy;

namespace {

// Sets an environment variable for one scope, then puts back what was there (the
// suite also runs with ARRAYBRIDGE_OPENCL_NAMESPACE=private).
struct ScopedEnv {
  std::string name;
  const char* before;
  std::string saved;
  ScopedEnv(const char* variable, const char* value) : name(variable), before(std::getenv(variable)) {
    if (before) saved = before;
    value ? setenv(variable, value, 1) : unsetenv(variable);
  }
  ~ScopedEnv() { before ? setenv(name.c_str(), saved.c_str(), 1) : unsetenv(name.c_str()); }
};

// The fake foreign LLVM (tests/opencl/fake_llvm) in the global scope for one scope.
struct ForeignLlvm {
  void* handle = dlopen(ABR_FAKE_LLVM_PATH, RTLD_NOW | RTLD_GLOBAL);
  ForeignLlvm() { REQUIRE_MESSAGE(handle, dlerror()); }
  ~ForeignLlvm() { dlclose(handle); }
};

// A namespace of its own is refused beside the CUDA driver (tests/cuda/test_namespace_keys.cpp).
bool cuda_driver_loaded() {
  if (!abr::cuda_driver_loaded()) return false;
  MESSAGE("skipped: the CUDA driver is loaded in this process, and a namespace of its own is refused beside it");
  return true;
}

}  // namespace

TEST_CASE("a private copy of the ICD loader and its driver works, and its devices match the shared copy's") {
  if (cuda_driver_loaded()) return;
  std::string reason;
  const std::unique_ptr<abr::opencl::Api> own =
      abr::opencl::load_api("libOpenCL.so.1", NamespacePolicy::Private, &reason);
  REQUIRE_MESSAGE(own, reason);
  CHECK(own->private_namespace);
  const std::unique_ptr<abr::opencl::Api> shared =
      abr::opencl::load_api("libOpenCL.so.1", NamespacePolicy::Global, &reason);
  REQUIRE_MESSAGE(shared, reason);
  CHECK_FALSE(shared->private_namespace);
  // Two loaders, not one.
  CHECK(reinterpret_cast<void*>(own->GetPlatformIDs) != reinterpret_cast<void*>(shared->GetPlatformIDs));

  const abr::opencl::Discovery mine = abr::opencl::discover_with(own.get(), "");
  const abr::opencl::Discovery theirs = abr::opencl::discover_with(shared.get(), "");
  REQUIRE(mine.devices.size() == theirs.devices.size());
  REQUIRE(!mine.devices.empty());
  CHECK(std::string(mine.report.info.detail).find("libOpenCL.so.1 (in a link-map namespace of its own): ") == 0);
  CHECK(std::string(theirs.report.info.detail)
            .find("libOpenCL.so.1 (in the shared namespace: as ARRAYBRIDGE_OPENCL_NAMESPACE=global asks): ") == 0);
  for (std::size_t k = 0; k < mine.devices.size(); ++k) {
    INFO("opencl:" << k);
    CHECK(mine.devices[k] != theirs.devices[k]);  // another copy of the driver: other pointers
    CHECK_FALSE(mine.keys[k].empty());
    CHECK(mine.keys[k] == theirs.keys[k]);
    // Our loader reaches the other copy's objects through their own dispatch table.
    CHECK(abr::opencl::device_key(*own, theirs.devices[k]) == mine.keys[k]);
  }
  if (mine.devices.size() > 1) CHECK(mine.keys[0] != mine.keys[1]);

  // The private driver does real work: a buffer written and read back.
  cl_int status = CL_SUCCESS;
  cl_context context = own->CreateContext(nullptr, 1, &mine.devices[0], nullptr, nullptr, &status);
  REQUIRE(status == CL_SUCCESS);
  cl_command_queue queue = own->CreateCommandQueueWithProperties(context, mine.devices[0], nullptr, &status);
  REQUIRE(status == CL_SUCCESS);
  const std::vector<int32_t> values{1, -2, 3, 1 << 30};
  std::vector<int32_t> back(values.size());
  cl_mem mem = own->CreateBuffer(context, CL_MEM_READ_WRITE, values.size() * 4, nullptr, &status);
  REQUIRE(status == CL_SUCCESS);
  CHECK(own->EnqueueWriteBuffer(queue, mem, CL_TRUE, 0, values.size() * 4, values.data(), 0, nullptr, nullptr) ==
        CL_SUCCESS);
  CHECK(own->EnqueueReadBuffer(queue, mem, CL_TRUE, 0, back.size() * 4, back.data(), 0, nullptr, nullptr) ==
        CL_SUCCESS);
  CHECK(back == values);
  own->ReleaseMemObject(mem);
  own->ReleaseCommandQueue(queue);
  own->ReleaseContext(context);
}

TEST_CASE("another LLVM in the global scope is found, and named where it would stop OpenCL") {
  if (cuda_driver_loaded()) return;
  CHECK(abr::opencl::foreign_llvm().empty());  // the test program has none of its own
  {
    std::string reason;
    abr::opencl::OpenedLoader shared = abr::opencl::open_loader("libOpenCL.so.1", NamespacePolicy::Auto, &reason);
    REQUIRE_MESSAGE(shared.handle, reason);
    CHECK_FALSE(shared.private_namespace);  // nothing to keep away from: the shared namespace
    CHECK(shared.where == "in the shared namespace");
    dlclose(shared.handle);
  }
  ForeignLlvm llvm;
  const std::string found = abr::opencl::foreign_llvm();
  CHECK(found == ABR_FAKE_LLVM_PATH);

  std::string reason;
  abr::opencl::OpenedLoader opened = abr::opencl::open_loader("libOpenCL.so.1", NamespacePolicy::Auto, &reason);
  REQUIRE_MESSAGE(opened.handle, reason);
  CHECK(opened.private_namespace);
  CHECK(opened.where == "in a link-map namespace of its own, away from libfake-llvm.so's LLVM");

  // Sharing the namespace would crash a driver built on LLVM: refused, with the way out.
  reason.clear();
  opened = abr::opencl::open_loader("libOpenCL.so.1", NamespacePolicy::Global, &reason);
  CHECK(opened.handle == nullptr);
  CHECK(reason ==
        "not opened: libfake-llvm.so's LLVM would crash PoCL beside it in the shared namespace, which "
        "ARRAYBRIDGE_OPENCL_NAMESPACE=global asks for; unset it to give libOpenCL.so.1 a namespace of its "
        "own");

  // A loader that cannot be opened at all says so, in either namespace.
  CHECK(abr::opencl::load_api("/nonexistent/libOpenCL.so.1", NamespacePolicy::Auto, &reason) == nullptr);
  CHECK(reason.find("no namespace of its own for /nonexistent/libOpenCL.so.1 (libOpenCL.so.1: cannot open") == 0);
  CHECK(reason.find("and libfake-llvm.so's LLVM would crash PoCL in the shared one; ") != std::string::npos);
}

TEST_CASE("ARRAYBRIDGE_OPENCL_NAMESPACE is read, and a value it does not know is named") {
  NamespacePolicy policy = NamespacePolicy::Global;
  std::string reason;
  {
    ScopedEnv env("ARRAYBRIDGE_OPENCL_NAMESPACE", " Private ");
    CHECK(abr::opencl::namespace_policy(&policy, &reason));
    CHECK(policy == NamespacePolicy::Private);
  }
  {
    ScopedEnv env("ARRAYBRIDGE_OPENCL_NAMESPACE", "global");
    CHECK(abr::opencl::namespace_policy(&policy, &reason));
    CHECK(policy == NamespacePolicy::Global);
  }
  {
    ScopedEnv env("ARRAYBRIDGE_OPENCL_NAMESPACE", nullptr);
    CHECK(abr::opencl::namespace_policy(&policy, &reason));  // unset: auto
    CHECK(policy == NamespacePolicy::Auto);
  }
  ScopedEnv env("ARRAYBRIDGE_OPENCL_NAMESPACE", "own");
  CHECK_FALSE(abr::opencl::namespace_policy(&policy, &reason));
  CHECK(reason == "ARRAYBRIDGE_OPENCL_NAMESPACE=own is not one of auto, private, global");
}
