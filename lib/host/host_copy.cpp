#include "lib/host/host_copy.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "lib/tensor/dtype.hpp"
#include "lib/host/host_cast.hpp"
#include "lib/host/strided.hpp"

namespace abr {
namespace {

// A normalized copy between two host pointers.
struct HostCopy {
  const char* src;
  char* dst;
  std::vector<Dim> dims;
  bool empty;
};

HostCopy normalize_host(HostSide src, std::size_t src_item, char* dst, const int64_t* dst_strides, std::size_t dst_item,
                        const int64_t* shape, int ndim) {
  // Offsets are applied as integers: pointers are formed only for real elements.
  StridedCopy c = normalize_copy(reinterpret_cast<intptr_t>(src.first), src.strides, src_item,
                                 reinterpret_cast<intptr_t>(dst), dst_strides, dst_item, shape, ndim);
  return {reinterpret_cast<const char*>(c.src), reinterpret_cast<char*>(c.dst), std::move(c.dims), c.empty};
}

// Calls f(src, dst) at every index of `outer` (row-major odometer).
template <class F>
void for_each_index(const Dim* outer, int m, const char* src, char* dst, F&& f) {
  if (m == 0) {
    f(src, dst);
    return;
  }
  int64_t idx[ABR_MAX_NDIM] = {};  // m <= ndim <= ABR_MAX_NDIM (validated)
  int64_t so = 0, dof = 0;
  for (;;) {
    f(src + so, dst + dof);
    int i = m - 1;
    for (; i >= 0; --i) {
      if (++idx[i] < outer[i].n) {
        so += outer[i].ss;
        dof += outer[i].ds;
        break;
      }
      so -= outer[i].ss * (outer[i].n - 1);
      dof -= outer[i].ds * (outer[i].n - 1);
      idx[i] = 0;
    }
    if (i < 0) return;
  }
}

// Every other element into a contiguous destination (a step-2 slice). Returns how
// many elements it copied; the caller finishes the rest one by one.
template <std::size_t E>
int64_t every_other(const char* s, char* d, int64_t n) {
#if defined(__SSE2__)
  if constexpr (E == 4) {
    int64_t j = 0;
    // The second load reads one element past the block's last: stop while that
    // element still belongs to the view, so nothing outside it is ever read.
    for (; j + 5 <= n; j += 4) {  // two loads, one shuffle keeping lanes 0 and 2 of each
      const __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(s + 8 * j));
      const __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(s + 8 * j + 16));
      _mm_storeu_ps(reinterpret_cast<float*>(d + 4 * j), _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    }
    return j;
  } else if constexpr (E == 8) {
    int64_t j = 0;
    for (; j + 3 <= n; j += 2) {  // likewise one element of margin
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * j));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * j + 16));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 8 * j), _mm_unpacklo_epi64(a, b));
    }
    return j;
  }
#endif
  (void)s, (void)d, (void)n;
  return 0;
}

template <std::size_t E>
void strided_row(const char* s, int64_t ss, char* d, int64_t ds, int64_t n) {
  constexpr int64_t e = static_cast<int64_t>(E);
  int64_t j = 0;
  if (ds == e && ss == -e) {
    // Reversal: read blocks forwards, write them reversed (the compiler vectorizes both).
    constexpr int64_t B = 64 / E > 0 ? 64 / E : 1;
    unsigned char block[B * E];
    for (; j + B <= n; j += B) {
      std::memcpy(block, s - (j + B - 1) * e, B * E);
      for (int64_t k = 0; k < B; ++k) std::memcpy(d + (j + k) * e, block + (B - 1 - k) * e, E);
    }
  } else if (ds == e && ss == 2 * e) {
    j = every_other<E>(s, d, n);
  }
  for (; j < n; ++j) std::memcpy(d + j * ds, s + j * ss, E);
}

using RowFn = void (*)(const char*, int64_t, char*, int64_t, int64_t);

RowFn strided_row_for(std::size_t itemsize) {
  switch (itemsize) {
    case 1: return strided_row<1>;
    case 2: return strided_row<2>;
    case 4: return strided_row<4>;
    case 8: return strided_row<8>;
    default: return strided_row<16>;
  }
}

// Transposes tile by tile so that both the strided reads and the contiguous
// writes of one tile stay in cache. a: the destination's contiguous dim;
// b: the dim along which the source is (nearly) contiguous.
template <std::size_t E>
void transpose_tiles(const char* s, char* d, Dim a, Dim b) {
  constexpr int64_t T = E <= 4 ? 32 : 16;
  for (int64_t b0 = 0; b0 < b.n; b0 += T) {
    const int64_t b1 = std::min(b.n, b0 + T);
    for (int64_t a0 = 0; a0 < a.n; a0 += T) {
      const int64_t a1 = std::min(a.n, a0 + T);
      for (int64_t j = b0; j < b1; ++j) {
        const char* sp = s + j * b.ss;
        char* dp = d + j * b.ds;
        for (int64_t i = a0; i < a1; ++i) std::memcpy(dp + i * static_cast<int64_t>(E), sp + i * a.ss, E);
      }
    }
  }
}

using TileFn = void (*)(const char*, char*, Dim, Dim);

TileFn transpose_for(std::size_t itemsize) {
  switch (itemsize) {
    case 1: return transpose_tiles<1>;
    case 2: return transpose_tiles<2>;
    case 4: return transpose_tiles<4>;
    case 8: return transpose_tiles<8>;
    default: return transpose_tiles<16>;
  }
}

int64_t magnitude(int64_t v) { return v < 0 ? -v : v; }

}  // namespace

void host_copy(HostSide src, char* dst_first, const int64_t* dst_strides, const int64_t* shape, int ndim,
               std::size_t itemsize) {
  const HostCopy c = normalize_host(src, itemsize, dst_first, dst_strides, itemsize, shape, ndim);
  if (c.empty) return;
  const int m = static_cast<int>(c.dims.size());
  const int64_t E = static_cast<int64_t>(itemsize);
  if (m == 0) {
    std::memcpy(c.dst, c.src, itemsize);
    return;
  }
  const Dim inner = c.dims.back();
  if (inner.ss == E && inner.ds == E) {  // contiguous rows (one row when everything merged)
    const std::size_t row = static_cast<std::size_t>(inner.n) * itemsize;
    for_each_index(c.dims.data(), m - 1, c.src, c.dst, [row](const char* s, char* d) { std::memcpy(d, s, row); });
    return;
  }
  // A transpose: the destination is contiguous along `inner`, the source along another dim.
  if (inner.ds == E && m >= 2 && inner.n >= 8) {
    int k = -1;
    for (int i = 0; i < m - 1; ++i)
      if (magnitude(c.dims[i].ss) < magnitude(inner.ss) && c.dims[i].n >= 8 &&
          (k < 0 || magnitude(c.dims[i].ss) < magnitude(c.dims[k].ss)))
        k = i;
    if (k >= 0) {
      const Dim b = c.dims[k];
      std::vector<Dim> outer;
      for (int i = 0; i < m - 1; ++i)
        if (i != k) outer.push_back(c.dims[i]);
      const TileFn tile = transpose_for(itemsize);
      for_each_index(outer.data(), static_cast<int>(outer.size()), c.src, c.dst,
                     [&](const char* s, char* d) { tile(s, d, inner, b); });
      return;
    }
  }
  const RowFn row = strided_row_for(itemsize);
  for_each_index(c.dims.data(), m - 1, c.src, c.dst,
                 [&](const char* s, char* d) { row(s, inner.ss, d, inner.ds, inner.n); });
}

void host_cast_copy(HostSide src, DLDataType from, char* dst_first, const int64_t* dst_strides, DLDataType to,
                    const int64_t* shape, int ndim) {
  const CastRowFn cast = cast_row_for(from, to);  // throws before anything is written
  const HostCopy c = normalize_host(src, from.bits / 8, dst_first, dst_strides, to.bits / 8, shape, ndim);
  if (c.empty) return;
  const int m = static_cast<int>(c.dims.size());
  if (m == 0) {
    cast(c.src, 0, c.dst, 0, 1);
    return;
  }
  const Dim inner = c.dims.back();
  for_each_index(c.dims.data(), m - 1, c.src, c.dst,
                 [&](const char* s, char* d) { cast(s, inner.ss, d, inner.ds, inner.n); });
}

void host_copy_layout(const Layout& src, const char* src_first, DLDataType dst_dtype, char* dst_first,
                      const int64_t* dst_strides) {
  const HostSide from{src_first, src.strides.data()};
  if (same_dtype(src.dtype, dst_dtype))
    host_copy(from, dst_first, dst_strides, src.shape.data(), src.ndim(), src.itemsize);
  else
    host_cast_copy(from, src.dtype, dst_first, dst_strides, dst_dtype, src.shape.data(), src.ndim());
}

bool can_cast(DLDataType from, DLDataType to) { return cast_row_or_null(from, to) != nullptr; }

}  // namespace abr
