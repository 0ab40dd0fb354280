// The program's operator new, which a test can tell to fail (FailingNew in
// tests/support/failing_new.hpp): the library is linked in statically, so its
// containers allocate through it. Only allocations made for this program's own
// code on the arming thread count: directly, or through the C++ runtime
// (std::string, streams, threads: libstdc++ allocates for them), but not for a
// shared library (the fake CUDA driver or PoCL never throw on a real system's
// behalf), nor on the fake's threads or the host threads. Every form passes on to
// the next definition (libstdc++'s, or a sanitizer's, which then still sees each
// new paired with its own delete and size).
#include "tests/support/failing_new.hpp"

#include <dlfcn.h>
#include <execinfo.h>

#include <cstdio>
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

// Whether the allocation made by code at `caller` is the one to fail.
bool fails_now(void* caller) {
  if (allocations_left >= 0 && for_this_program(caller) && allocations_left-- == 0) {
    allocations_left = -2;  // failed once: the rest succeed (cleanup allocates too)
    return true;
  }
  return false;
}

// The definition of `symbol` this file's replaces (dlsym allocates with malloc only).
template <class F>
F next(const char* symbol) {
  void* found = dlsym(RTLD_NEXT, symbol);
  if (!found) {
    std::fprintf(stderr, "failing_new: no next %s\n", symbol);
    std::abort();
  }
  return reinterpret_cast<F>(found);
}

using New = void* (*)(std::size_t);
using NewNothrow = void* (*)(std::size_t, const std::nothrow_t&);
using Delete = void (*)(void*);
using DeleteSized = void (*)(void*, std::size_t);
using DeleteNothrow = void (*)(void*, const std::nothrow_t&);
}  // namespace

namespace test {
FailingNew::FailingNew(long after) { allocations_left = after; }
FailingNew::~FailingNew() { allocations_left = -1; }
bool FailingNew::failed() const { return allocations_left == -2; }
}  // namespace test

void* operator new(std::size_t bytes) {
  static const New real = next<New>("_Znwm");
  if (fails_now(__builtin_return_address(0))) throw std::bad_alloc();
  return real(bytes);
}
void* operator new[](std::size_t bytes) {
  static const New real = next<New>("_Znam");
  if (fails_now(__builtin_return_address(0))) throw std::bad_alloc();
  return real(bytes);
}
void* operator new(std::size_t bytes, const std::nothrow_t& tag) noexcept {
  static const NewNothrow real = next<NewNothrow>("_ZnwmRKSt9nothrow_t");
  return fails_now(__builtin_return_address(0)) ? nullptr : real(bytes, tag);
}
void* operator new[](std::size_t bytes, const std::nothrow_t& tag) noexcept {
  static const NewNothrow real = next<NewNothrow>("_ZnamRKSt9nothrow_t");
  return fails_now(__builtin_return_address(0)) ? nullptr : real(bytes, tag);
}
void operator delete(void* memory) noexcept {
  static const Delete real = next<Delete>("_ZdlPv");
  real(memory);
}
void operator delete[](void* memory) noexcept {
  static const Delete real = next<Delete>("_ZdaPv");
  real(memory);
}
void operator delete(void* memory, std::size_t bytes) noexcept {
  static const DeleteSized real = next<DeleteSized>("_ZdlPvm");
  real(memory, bytes);
}
void operator delete[](void* memory, std::size_t bytes) noexcept {
  static const DeleteSized real = next<DeleteSized>("_ZdaPvm");
  real(memory, bytes);
}
void operator delete(void* memory, const std::nothrow_t& tag) noexcept {
  static const DeleteNothrow real = next<DeleteNothrow>("_ZdlPvRKSt9nothrow_t");
  real(memory, tag);
}
void operator delete[](void* memory, const std::nothrow_t& tag) noexcept {
  static const DeleteNothrow real = next<DeleteNothrow>("_ZdaPvRKSt9nothrow_t");
  real(memory, tag);
}
