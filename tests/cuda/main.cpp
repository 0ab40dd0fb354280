// The CUDA tests' entry point. Without ARRAYBRIDGE_CUDA_LIBRARY they run against
// the fake driver built next to them (tests/cuda/fake_driver.cpp); on a GPU
// machine, ARRAYBRIDGE_CUDA_LIBRARY=libcuda.so.1 runs the same tests for real
// (those needing the fake's controls then skip).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/cuda/cuda_helpers.hpp"

int sticky_child_main();                       // test_sticky_child.cpp: the child's side of that test
int queued_fault_child_main(bool asking);      // test_sticky_child.cpp: a queued transfer that faults
int ipc_child_main(int argc, char** argv);     // test_ipc.cpp: the importing process
int raw_ipc_open_child_main(const char* hex);  // test_fake_rules.cpp: opens a driver handle elsewhere
int exit_child_main();                         // test_exit.cpp: exits with its runtime alive

int main(int argc, char** argv) {
  if (!std::getenv("ARRAYBRIDGE_CUDA_LIBRARY")) {
    // The fake is this build's GPU: if it cannot load, every test would skip and pass.
    void* fake = dlopen(ABR_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!fake) {
      std::fprintf(stderr, "the fake CUDA driver does not load: %s\n", dlerror());
      return 1;
    }
    dlclose(fake);
    setenv("ARRAYBRIDGE_CUDA_LIBRARY", ABR_FAKE_CUDA_PATH, /*overwrite=*/1);
  }
  // OpenCL through a library that counts its reads, writes and waits (opencl_counter/),
  // built with this program: if it cannot load where OpenCL itself does, the tests that
  // read its counts would skip and pass. They skip, saying so, only where the caller
  // names another library or the machine has no OpenCL at all.
  if (!std::getenv("ARRAYBRIDGE_OPENCL_LIBRARY")) {
    if (void* counter = dlopen(ABR_OPENCL_COUNTER_PATH, RTLD_NOW | RTLD_LOCAL)) {
      dlclose(counter);
      setenv("ARRAYBRIDGE_OPENCL_LIBRARY", ABR_OPENCL_COUNTER_PATH, /*overwrite=*/1);
    } else {
      const std::string why = dlerror();
      void* opencl = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
      if (opencl) {
        dlclose(opencl);
        std::fprintf(stderr,
                     "the OpenCL call counter does not load, though OpenCL does: %s\n"
                     "(set ARRAYBRIDGE_OPENCL_LIBRARY to run without it)\n",
                     why.c_str());
        return 1;
      }
      std::fprintf(stderr, "no OpenCL on this machine: the OpenCL call counter's tests skip (%s)\n", why.c_str());
    }
  }
  if (argc == 2 && std::strcmp(argv[1], "--sticky-child") == 0) return sticky_child_main();
  if (argc == 3 && std::strcmp(argv[1], "--queued-fault-child") == 0)
    return queued_fault_child_main(std::strcmp(argv[2], "asking") == 0);
  if (argc >= 2 && std::strcmp(argv[1], "--ipc-child") == 0) return ipc_child_main(argc, argv);
  if (argc == 3 && std::strcmp(argv[1], "--raw-ipc-open") == 0) return raw_ipc_open_child_main(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "--exit-child") == 0) return exit_child_main();
  doctest::Context context(argc, argv);
  const int failed = context.run();
  // Each test's fixture fails it for its own findings; this line sums them up for the log.
  test::Fake fake;
  const long long findings = fake ? fake.stat("findings") : 0;
  if (findings > 0)
    std::fprintf(stderr, "the fake CUDA driver has %lld finding(s) in all; the last: %s\n", findings,
                 fake.finding(findings - 1));
  return failed;
}
