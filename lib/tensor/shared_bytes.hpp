// Whether two views share a byte: by their element lattices, not their bounding
// boxes, so that x[0::2] and x[1::2], or a matrix's left and right halves, are told
// apart (a copy between them needs no temporary), as NumPy's may_share_memory does.
#pragma once

#include <cstdint>

#include "lib/tensor/layout.hpp"

namespace abr {

// Whether view `a` of memory at `a_base` and view `b` of memory at `b_base` (positions
// in one address space; each view adds its byte_offset) touch a byte in common. Exact
// within a bounded search; past the bound it answers true (a needless temporary, never a race).
bool views_share_bytes(const Layout& a, uintptr_t a_base, const Layout& b, uintptr_t b_base);

}  // namespace abr
