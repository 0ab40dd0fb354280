// Whether two views share a byte: by their element lattices, not their bounding
// boxes, so that x[0::2] and x[1::2], or a matrix's left and right halves, are told
// apart (a copy between them needs no temporary), as NumPy's may_share_memory does.
#pragma once

#include <cstdint>

#include "lib/tensor/layout.hpp"

namespace abr {

// The search below, for views whose bounding boxes meet.
bool lattices_share_bytes(const Layout& a, uintptr_t a_base, const Layout& b, uintptr_t b_base);

// Whether view `a` of memory at `a_base` and view `b` of memory at `b_base` (positions
// in one address space; each view adds its byte_offset) touch a byte in common. Exact
// within a bounded search; past the bound it answers true (a needless temporary, never a
// race). Inline: most pairs (a copy between two arrays) end at their bounding boxes, on
// every abr_copy (out of line, that cost a 4 KiB host copy 3 ns of its 86).
inline bool views_share_bytes(const Layout& a, uintptr_t a_base, const Layout& b, uintptr_t b_base) {
  if (a.numel == 0 || b.numel == 0) return false;
  const intptr_t a0 = static_cast<intptr_t>(a_base) + static_cast<intptr_t>(a.byte_offset);
  const intptr_t b0 = static_cast<intptr_t>(b_base) + static_cast<intptr_t>(b.byte_offset);
  if (a0 + a.min_byte >= b0 + b.max_byte_end || b0 + b.min_byte >= a0 + a.max_byte_end) return false;
  return lattices_share_bytes(a, a_base, b, b_base);
}

}  // namespace abr
