#include "lib/run/host_sides.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/base/fault.hpp"

namespace abr {

std::unique_ptr<Event> HostMemorySide::read(uint64_t offset, char* block, std::size_t n) {
  copy_in_parallel(block, base_ + offset, n, threads_);
  return nullptr;
}

std::unique_ptr<Event> HostMemorySide::write(uint64_t offset, const char* block, std::size_t n) {
  copy_in_parallel(base_ + offset, block, n, threads_);
  return nullptr;
}

void HostSegmentsSide::copy(uint64_t offset, char* block, std::size_t n, bool into_block) {
  const auto copy_part = [&](uint64_t part_offset, std::size_t part_bytes) {
    map_.for_each(part_offset, part_bytes,
                  [&](std::size_t segment, uint64_t at, std::size_t in_range, std::size_t len) {
                    char* memory = bases_[segment] + at;
                    char* staged = block + (part_offset - offset) + in_range;
                    if (into_block)
                      std::memcpy(staged, memory, len);
                    else
                      std::memcpy(memory, staged, len);
                  });
  };
  // As copy_in_parallel cuts one memcpy: parts of at least kSplitPiece, from two kParallelPiece.
  const std::size_t parts =
      threads_ > 1 && n >= 2 * kParallelPiece ? std::min<std::size_t>(threads_, n / kSplitPiece) : 1;
  if (parts <= 1) return copy_part(offset, n);
  host_threads().parallel_for(parts, threads_, [&](std::size_t i) {
    const std::size_t begin = n * i / parts, end = n * (i + 1) / parts;
    copy_part(offset + begin, end - begin);
  });
}

std::unique_ptr<Event> HostSegmentsSide::read(uint64_t offset, char* block, std::size_t n) {
  copy(offset, block, n, /*into_block=*/true);
  return nullptr;
}

std::unique_ptr<Event> HostSegmentsSide::write(uint64_t offset, const char* block, std::size_t n) {
  copy(offset, const_cast<char*>(block), n, /*into_block=*/false);
  return nullptr;
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
