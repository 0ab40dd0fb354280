// The program's operator new, which a test can tell to fail (FailingNew in
// tests/support/failing_new.hpp): the library is linked in statically, so its
// containers allocate through it. Only allocations made for this program's own
// code on the arming thread count: directly, or through the C++ runtime
// (std::string, streams, threads: libstdc++ allocates for them), but not for a
// shared library (the fake CUDA driver or PoCL never throw on a real system's
// behalf), nor on the fake's threads or the host threads.
#include "tests/support/failing_new.hpp"

#include <dlfcn.h>
#include <execinfo.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace {
thread_local long allocations_left = -1;  // -1: never fail

enum class Owner { ThisProgram, CxxRuntime, Other };

Owner owner_of(void* address) {
  static void* const base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&owner_of), &info) ? info.dli_fbase : nullptr;
  }();
  Dl_info info{};
  if (!dladdr(address, &info)) return Owner::Other;
  if (info.dli_fbase == base) return Owner::ThisProgram;
  return info.dli_fname && std::strstr(info.dli_fname, "libstdc++") ? Owner::CxxRuntime : Owner::Other;
}

// Whether an allocation whose operator new was called from `caller` is made for
// this program's code: the first frame above it outside libstdc++ is ours.
bool for_this_program(void* caller) {
  const Owner owner = owner_of(caller);
  if (owner != Owner::CxxRuntime) return owner == Owner::ThisProgram;
  void* frames[32];
  const int depth = backtrace(frames, 32);  // unwinds without operator new
  int i = 0;
  while (i < depth && frames[i] != caller) ++i;
  for (++i; i < depth; ++i) {
    const Owner above = owner_of(frames[i]);
    if (above != Owner::CxxRuntime) return above == Owner::ThisProgram;
  }
  return false;
}

// An allocation made by code at `caller`: the one to fail, if made for this program.
void* allocate(std::size_t bytes, void* caller) {
  if (allocations_left >= 0 && for_this_program(caller) && allocations_left-- == 0) {
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
