// The CUDA tests' entry point. Without ARRAYBRIDGE_CUDA_LIBRARY they run against
// the fake driver built next to them (tests/cuda/fake_driver.cpp); on a GPU
// machine, ARRAYBRIDGE_CUDA_LIBRARY=libcuda.so.1 runs the same tests for real
// (those needing the fake's controls then skip).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>

int sticky_child_main();  // test_sticky_child.cpp: the child's side of that test

int main(int argc, char** argv) {
  setenv("ARRAYBRIDGE_CUDA_LIBRARY", ABR_FAKE_CUDA_PATH, /*overwrite=*/0);
  if (argc == 2 && std::strcmp(argv[1], "--sticky-child") == 0) return sticky_child_main();
  doctest::Context context(argc, argv);
  return context.run();
}
