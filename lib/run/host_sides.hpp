// The host's sides of a staged transfer (lib/run/pipeline.hpp): host memory as it is,
// or a strided or converted view the host engine packs and scatters by rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "lib/tensor/layout.hpp"
#include "lib/run/pipeline.hpp"
#include "lib/tensor/segments.hpp"

namespace abr {

// Pageable host memory: each chunk is copied by `threads` host threads, who also
// touch a new destination's pages first, in parallel.
class HostMemorySide final : public ChunkSide {
 public:
  HostMemorySide(const void* base, unsigned threads)
      : base_(static_cast<char*>(const_cast<void*>(base))), threads_(threads) {}
  bool asynchronous() const override { return false; }
  std::unique_ptr<Event> read(uint64_t offset, char* block, std::size_t n) override;
  std::unique_ptr<Event> write(uint64_t offset, const char* block, std::size_t n) override;

 private:
  char* base_;
  unsigned threads_;
};

// Several tensors' pageable host memory end to end (a batch's one pipeline): each
// chunk is cut into `threads` equal parts, whichever tensors they cross, so small
// tensors keep the threads as busy as one large one.
class HostSegmentsSide final : public ChunkSide {
 public:
  HostSegmentsSide(std::vector<char*> bases, SegmentMap map, unsigned threads)
      : bases_(std::move(bases)), map_(std::move(map)), threads_(threads) {}
  bool asynchronous() const override { return false; }
  std::unique_ptr<Event> read(uint64_t offset, char* block, std::size_t n) override;
  std::unique_ptr<Event> write(uint64_t offset, const char* block, std::size_t n) override;

 private:
  void copy(uint64_t offset, char* block, std::size_t n, bool into_block);
  std::vector<char*> bases_;  // each tensor's first byte
  SegmentMap map_;
  unsigned threads_;
};

// A strided or converted host view, packed into (a source) or scattered out of
// (a destination) compact blocks of `bytes_dtype` by the host engine on `threads`
// threads. A chunk is whole rows of the view's first dimension: offsets and sizes
// must be multiples of row_bytes() (the planner cuts the chunks so).
class HostLayoutSide final : public ChunkSide {
 public:
  HostLayoutSide(const Layout& view, const char* first, DLDataType bytes_dtype, unsigned threads);
  bool asynchronous() const override { return false; }
  std::unique_ptr<Event> read(uint64_t offset, char* block, std::size_t n) override;
  std::unique_ptr<Event> write(uint64_t offset, const char* block, std::size_t n) override;

 private:
  Layout rows(uint64_t offset, std::size_t n, int64_t* first_row) const;  // the box of whole rows
  char* row_start(int64_t row) const;                                     // its first element
  Layout view_;
  char* first_;
  DLDataType bytes_dtype_;
  uint64_t row_;
  unsigned threads_;
};

}  // namespace abr
