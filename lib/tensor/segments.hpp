// Several tensors' compact bytes laid end to end, as one side of a staged transfer
// sees them: a batch streams many tensors through one pipeline (lib/run/batch.cpp), so
// a chunk may hold the end of one tensor and the start of the next.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace abr {

class SegmentMap {
 public:
  // The next tensor's bytes follow the ones before.
  void add(uint64_t bytes) { ends_.push_back(total() + bytes); }
  uint64_t total() const { return ends_.empty() ? 0 : ends_.back(); }

  // piece(segment, offset in it, offset in the range, bytes) for each part of
  // [offset, offset + n) inside one segment, in order.
  template <class Piece>
  void for_each(uint64_t offset, std::size_t n, Piece&& piece) const {
    const uint64_t end = offset + n;
    auto next = std::upper_bound(ends_.begin(), ends_.end(), offset);  // the segment holding `offset`
    for (uint64_t at = offset; at < end && next != ends_.end(); ++next) {
      const std::size_t segment = static_cast<std::size_t>(next - ends_.begin());
      const uint64_t begin = segment ? ends_[segment - 1] : 0;
      const uint64_t stop = std::min(*next, end);
      if (stop > at)
        piece(segment, at - begin, static_cast<std::size_t>(at - offset), static_cast<std::size_t>(stop - at));
      at = stop;
    }
  }

 private:
  std::vector<uint64_t> ends_;  // each segment's end, past the ones before
};

}  // namespace abr
