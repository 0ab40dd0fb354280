// Whether two views share a byte: by their element lattices, not their bounding
// boxes, so that x[0::2] and x[1::2], or a matrix's left and right halves, are told
// apart (a copy between them needs no temporary), as NumPy's may_share_memory does.
#pragma once

#include <cstdint>

#include "lib/tensor/layout.hpp"

namespace abr {

// Whether the two views' bounding boxes meet (the bytes from each one's lowest to its
// highest): a necessary condition, and all that can be said of two handles whose
// concurrent use the driver forbids when their memory overlaps at all (OpenCL sub-buffers).
// 128 bits: a handle that is no address plus a byte_offset may pass 63.
inline bool boxes_meet(const Layout& a, uintptr_t a_base, const Layout& b, uintptr_t b_base) {
  if (a.numel == 0 || b.numel == 0) return false;
  const __int128 a0 = static_cast<__int128>(a_base) + a.byte_offset, b0 = static_cast<__int128>(b_base) + b.byte_offset;
  return a0 + a.min_byte < b0 + b.max_byte_end && b0 + b.min_byte < a0 + a.max_byte_end;
}

// The search below, for views whose bounding boxes meet.
bool lattices_share_bytes(const Layout& a, uintptr_t a_base, const Layout& b, uintptr_t b_base);

// Whether view `a` of memory at `a_base` and view `b` of memory at `b_base` (positions
// in one address space; each view adds its byte_offset) touch a byte in common. Exact
// within a bounded search; past the bound it answers true (a needless temporary, never a
// race). Inline: most pairs (a copy between two arrays) end at their bounding boxes, on
// every abr_copy (out of line, that cost a 4 KiB host copy 3 ns of its 86).
inline bool views_share_bytes(const Layout& a, uintptr_t a_base, const Layout& b, uintptr_t b_base) {
  return boxes_meet(a, a_base, b, b_base) && lattices_share_bytes(a, a_base, b, b_base);
}

// Whether two different elements of one view touch a byte in common (the check of a
// destination's strides, where a quicker sufficient test is not met: NumPy's
// as_strided(b, (3, 2), (8, 12)) interleaves its dimensions, yet its elements are apart).
// Exact within a bounded search; past the bound, Unknown.
enum class Sharing { Apart, Share, Unknown };
Sharing elements_share_bytes(const Layout& view);

}  // namespace abr
