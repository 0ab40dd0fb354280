// The program's operator new, which a test can tell to fail (FailingNew in
// cuda_helpers.hpp): the library is linked in statically, so its containers
// allocate through it. Only allocations made by this program's own code on the
// arming thread count: not the fake driver's (a real driver never throws), nor the
// fake's threads or the host threads.
#include <dlfcn.h>

#include <cstdlib>
#include <new>

#include "tests/cuda/cuda_helpers.hpp"

namespace {
thread_local long allocations_left = -1;  // -1: never fail

// Whether code at `address` is this program's (the tests and the library), not a
// shared library's.
bool in_this_program(void* address) {
  static void* const base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&in_this_program), &info) ? info.dli_fbase : nullptr;
  }();
  Dl_info info{};
  return dladdr(address, &info) && info.dli_fbase == base;
}

// An allocation made by code at `caller`: the one to fail, if this program's.
void* allocate(std::size_t bytes, void* caller) {
  if (allocations_left >= 0 && in_this_program(caller) && allocations_left-- == 0) {
    allocations_left = -2;  // failed once: the rest succeed (cleanup allocates too)
    throw std::bad_alloc();
  }
  if (void* memory = std::malloc(bytes ? bytes : 1)) return memory;
  throw std::bad_alloc();
}
}  // namespace

namespace test {
FailingNew::FailingNew(long after) { allocations_left = after; }
FailingNew::~FailingNew() { allocations_left = -1; }
bool FailingNew::failed() const { return allocations_left == -2; }
}  // namespace test

void* operator new(std::size_t bytes) { return allocate(bytes, __builtin_return_address(0)); }
void* operator new[](std::size_t bytes) { return allocate(bytes, __builtin_return_address(0)); }
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t) noexcept { std::free(memory); }
// The nothrow forms too, so that every allocation and free of the program pairs
// malloc with free (ASan's own nothrow new would meet the free above).
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return allocate(bytes, __builtin_return_address(0));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return allocate(bytes, __builtin_return_address(0));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* memory, const std::nothrow_t&) noexcept { std::free(memory); }
void operator delete[](void* memory, const std::nothrow_t&) noexcept { std::free(memory); }
