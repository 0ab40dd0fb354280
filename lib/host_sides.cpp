#include "lib/host_sides.hpp"

#include <algorithm>
#include <array>

#include "lib/dtype.hpp"
#include "lib/error.hpp"
#include "lib/fault.hpp"

namespace abr {

std::unique_ptr<Event> HostMemorySide::read(uint64_t offset, char* block, std::size_t n) {
  copy_in_parallel(block, base_ + offset, n, threads_);
  return nullptr;
}

std::unique_ptr<Event> HostMemorySide::write(uint64_t offset, const char* block, std::size_t n) {
  copy_in_parallel(base_ + offset, block, n, threads_);
  return nullptr;
}

uint64_t HostLayoutSide::row_bytes(const Layout& view, DLDataType bytes_dtype) {
  const uint64_t rows = view.ndim() ? static_cast<uint64_t>(view.shape[0]) : 1;
  return rows ? view.numel / rows * itemsize(bytes_dtype) : 0;
}

HostLayoutSide::HostLayoutSide(const Layout& view, const char* first, DLDataType bytes_dtype, unsigned threads)
    : view_(view),
      first_(const_cast<char*>(first)),
      bytes_dtype_(bytes_dtype),
      row_(row_bytes(view, bytes_dtype)),
      threads_(threads) {}

Layout HostLayoutSide::rows(uint64_t offset, std::size_t n, int64_t* first_row) const {
  if (row_ == 0 || offset % row_ || n % row_)
    fail(ABR_ERR_INTERNAL, "a chunk of {} bytes at {} is not whole rows of {} bytes", n, offset, row_);
  *first_row = static_cast<int64_t>(offset / row_);
  Layout box = view_;
  if (box.ndim()) box.shape[0] = static_cast<int64_t>(n / row_);
  box.numel = box.ndim() ? view_.numel / static_cast<uint64_t>(view_.shape[0]) * (n / row_) : 1;
  return box;
}

char* HostLayoutSide::row_start(int64_t row) const {
  return first_ + (view_.ndim() ? row * view_.strides[0] * static_cast<int64_t>(view_.itemsize) : 0);
}

std::unique_ptr<Event> HostLayoutSide::read(uint64_t offset, char* block, std::size_t n) {
  int64_t row = 0;
  const Layout box = rows(offset, n, &row);
  const Layout packed = compact_layout(box.device, bytes_dtype_, box.shape, block);
  copy_layout_in_parallel(box, row_start(row), bytes_dtype_, block, packed.strides.data(), threads_);
  return nullptr;
}

std::unique_ptr<Event> HostLayoutSide::write(uint64_t offset, const char* block, std::size_t n) {
  int64_t row = 0;
  const Layout box = rows(offset, n, &row);
  const Layout packed = compact_layout(box.device, bytes_dtype_, box.shape, const_cast<char*>(block));
  copy_layout_in_parallel(packed, block, view_.dtype, row_start(row), view_.strides.data(), threads_);
  return nullptr;
}

}  // namespace abr
