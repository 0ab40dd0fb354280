// One owned reference to an OpenCL object, released through the loaded API; in a forked
// child one made before the fork is let go without a call (the driver's threads stayed in
// the parent: a call could hang on a lock one of them held), as Stream and Event are.
#pragma once

#include <utility>

#include "lib/platform/fork_guard.hpp"
#include "opencl/api.hpp"

namespace abr::opencl {

template <class T>
class Ref {
 public:
  using Release = cl_int(CL_API_CALL*)(T);

  Ref() = default;
  Ref(T handle, Release release) : handle_(handle), release_(release) {}
  ~Ref() { reset(); }
  Ref(Ref&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), release_(other.release_), made_(other.made_) {}
  Ref& operator=(Ref&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
      release_ = other.release_;
      made_ = other.made_;
    }
    return *this;
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;

  T get() const { return handle_; }
  bool inherited() const noexcept { return made_.inherited(); }  // made before this process forked
  explicit operator bool() const { return handle_ != nullptr; }
  void reset() noexcept {
    if (handle_ && !made_.inherited()) release_(handle_);
    handle_ = nullptr;
  }

 private:
  T handle_ = nullptr;
  Release release_ = nullptr;
  ForkStamp made_;
};

using MemRef = Ref<cl_mem>;
using EventRef = Ref<cl_event>;

}  // namespace abr::opencl
