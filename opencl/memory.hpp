// cl_mem buffers the runtime hands out, and host memory mapped into a view.
#pragma once

#include <memory>

#include "lib/tensor/layout.hpp"
#include "lib/tensor/storage.hpp"
#include "opencl/context.hpp"

namespace abr::opencl {

// Keeps one reference to a buffer; an exported tensor's deleter drops it.
class BufferStorage final : public Storage {
 public:
  explicit BufferStorage(MemRef mem) : mem_(std::move(mem)) {}
  cl_mem get() const { return mem_.get(); }

 private:
  MemRef mem_;
};

// A buffer over host memory used in place (CL_MEM_USE_HOST_PTR), as a result's storage.
// `owner` keeps the host memory alive; the buffer's destructor callback destroys it when
// the OpenCL implementation no longer uses the memory, or this storage does in a forked
// child, where the buffer is let go without a driver call and no callback will run.
class HostWrapStorage final : public Storage {
 public:
  HostWrapStorage(MemRef mem, std::unique_ptr<Storage>* owner) : mem_(std::move(mem)), owner_(owner) {}
  ~HostWrapStorage() override {
    if (mem_.inherited()) delete owner_;
  }
  cl_mem get() const { return mem_.get(); }

 private:
  MemRef mem_;
  std::unique_ptr<Storage>* owner_;  // the destructor callback's
};

// `owner` is moved from only on success.
std::unique_ptr<HostWrapStorage> wrap_host_memory(Context& context, void* base, std::size_t bytes, bool read_only,
                                                  std::unique_ptr<Storage>& owner);

// The bytes a view of `layout` touches, mapped into host memory on `queue`
// (blocking) and unmapped (enqueued) by unmap() or the destructor.
class MappedView {
 public:
  // `write`: the host will write; a compact view is then mapped without reading
  // its old contents (CL_MAP_WRITE_INVALIDATE_REGION).
  MappedView(const Api& cl, cl_command_queue queue, const Layout& layout, bool write);
  ~MappedView();
  MappedView(const MappedView&) = delete;
  MappedView& operator=(const MappedView&) = delete;

  char* first_element() const { return first_; }
  void unmap();  // throws ABR_ERR_BACKEND

 private:
  const Api& cl_;
  cl_command_queue queue_;
  cl_mem mem_;
  void* mapped_ = nullptr;
  char* first_ = nullptr;
};

}  // namespace abr::opencl
