#include "opencl/memory.hpp"

#include "lib/base/error.hpp"
#include "lib/base/fault.hpp"
#include "lib/base/log.hpp"

namespace abr::opencl {
namespace {

void CL_CALLBACK release_owner(cl_mem, void* owner) { delete static_cast<std::unique_ptr<Storage>*>(owner); }

}  // namespace

std::unique_ptr<HostWrapStorage> wrap_host_memory(Context& context, void* base, std::size_t bytes, bool read_only,
                                                  std::unique_ptr<Storage>& owner) {
  const cl_mem_flags access = read_only ? CL_MEM_READ_ONLY : CL_MEM_READ_WRITE;
  // An empty view has no memory to use: any buffer will do.
  MemRef mem =
      bytes ? context.create_buffer(access | CL_MEM_USE_HOST_PTR, bytes, base) : context.create_buffer(access, 0);
  auto holder = std::make_unique<std::unique_ptr<Storage>>();
  auto storage = std::make_unique<HostWrapStorage>(std::move(mem), holder.get());
  check(context.api().SetMemObjectDestructorCallback(storage->get(), release_owner, holder.get()),
        "clSetMemObjectDestructorCallback");
  *holder = std::move(owner);  // nothing can fail from here on
  holder.release();            // now the callback's
  return storage;
}

MappedView::MappedView(const Api& cl, cl_command_queue queue, const Layout& layout, bool write)
    : cl_(cl), queue_(queue), mem_(static_cast<cl_mem>(layout.data)) {
  const int64_t start = static_cast<int64_t>(layout.byte_offset) + layout.min_byte;
  const int64_t bytes = layout.max_byte_end - layout.min_byte;
  const cl_map_flags flags = !write ? CL_MAP_READ
      : layout.compact              ? CL_MAP_WRITE_INVALIDATE_REGION
                                    : CL_MAP_READ | CL_MAP_WRITE;  // keep the gaps
  cl_int status = CL_SUCCESS;
  fault::point(ABR_ERR_BACKEND, "OpenCL map");
  mapped_ = cl.EnqueueMapBuffer(queue, mem_, CL_TRUE, flags, static_cast<std::size_t>(start),
                                static_cast<std::size_t>(bytes), 0, nullptr, nullptr, &status);
  check(status, "clEnqueueMapBuffer");
  first_ = static_cast<char*>(mapped_) - layout.min_byte;
}

MappedView::~MappedView() {
  if (!mapped_) return;
  const cl_int status = cl_.EnqueueUnmapMemObject(queue_, mem_, mapped_, 0, nullptr, nullptr);
  if (status != CL_SUCCESS) log::warn("clEnqueueUnmapMemObject failed: {} ({})", error_name(status), status);
}

void MappedView::unmap() {
  void* mapped = std::exchange(mapped_, nullptr);
  check(cl_.EnqueueUnmapMemObject(queue_, mem_, mapped, 0, nullptr, nullptr), "clEnqueueUnmapMemObject");
}

}  // namespace abr::opencl
