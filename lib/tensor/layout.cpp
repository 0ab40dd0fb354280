#include "lib/tensor/layout.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/tensor/device_kinds.hpp"
#include "lib/tensor/dtype.hpp"
#include "lib/tensor/shared_bytes.hpp"
#include "lib/base/error.hpp"

namespace abr {

Dims compact_strides(const Dims& shape) {
  const std::size_t ndim = shape.size();
  Dims strides;
  strides.resize(ndim);  // each is written below
  const int64_t* extents = shape.data();
  int64_t* out = strides.data();
  int64_t step = 1;
  for (std::size_t i = ndim; i-- > 0;) {
    out[i] = step;
    // Callers have proven the product fits when no extent is 0. An empty tensor may
    // have huge other extents (the fuzzer found the overflow); nothing is ever
    // addressed through its strides, so stop growing them.
    if (__builtin_mul_overflow(step, extents[i] > 0 ? extents[i] : 1, &step)) step = out[i];
  }
  return strides;
}

Layout compact_layout(DLDevice device, DLDataType dtype, const Dims& shape, void* data) {
  Layout out;
  out.device = device;
  out.dtype = dtype;
  out.itemsize = itemsize(dtype);
  out.shape = shape;
  out.strides = compact_strides(shape);
  out.data = data;
  out.numel = 1;
  for (int64_t extent : shape) out.numel *= static_cast<uint64_t>(extent);  // the source's, already proven to fit
  out.nbytes = out.numel * out.itemsize;
  out.max_byte_end = static_cast<int64_t>(out.nbytes);
  out.compact = true;
  return out;
}

uint64_t row_bytes(const Layout& view, DLDataType dtype) {
  const uint64_t rows = view.ndim() ? static_cast<uint64_t>(view.shape[0]) : 1;
  return rows ? view.numel / rows * itemsize(dtype) : 0;
}

std::string shape_string(const Dims& shape) { return fmt::format("[{}]", fmt::join(shape.begin(), shape.end(), ", ")); }

namespace {

// Element strides times the item size, modulo 2^64, read as signed bytes: what a
// producer meant when it divided negative byte strides as unsigned numbers.
std::string wrapped_byte_strides(const Layout& layout) {
  Dims bytes(layout.strides.size());
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<int64_t>(static_cast<uint64_t>(layout.strides[i]) * layout.itemsize);
  return shape_string(bytes);
}

}  // namespace

void refuse_header(const DLManagedTensorVersioned& tensor, const char* what) {
  if (tensor.version.major != DLPACK_MAJOR_VERSION)
    fail(ABR_ERR_DLPACK_VERSION,
         "{}: DLPack major version {} (minor {}) is not supported (this library speaks {}.{}); only its deleter may "
         "be called",
         what, tensor.version.major, tensor.version.minor, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  fail(ABR_ERR_DLPACK_FLAGS, "{}: unknown flag bits {:#x} (DLPack {}.{})", what, tensor.flags & ~kKnownDLPackFlags,
       tensor.version.major, tensor.version.minor);
}

namespace {

// Whether no two elements of a layout share memory, by a quick test that is sure when
// it says yes: ordered by |stride|, each dimension's stride passes the span of those
// below it (so a slice, a transpose or a step of a dense tensor always passes).
// A layout that fails either aliases (strides {1, 1}) or interleaves its dimensions
// (as_strided's (3, 2) over strides (2, 3) elements): elements_share_bytes tells which.
// Zero strides are refused before this.
bool elements_disjoint(const Layout& layout) {
  struct Step {
    uint64_t stride, extent;  // unsigned: |INT64_MIN| is a valid 1-byte stride's size
  } steps[ABR_MAX_NDIM];      // |stride| and extent of each dimension of extent > 1
  int n = 0;
  for (int i = 0; i < layout.ndim(); ++i) {
    const int64_t stride = layout.strides[i];
    if (layout.shape[i] > 1)
      steps[n++] = {stride < 0 ? 0 - static_cast<uint64_t>(stride) : static_cast<uint64_t>(stride),
                    static_cast<uint64_t>(layout.shape[i])};
  }
  std::sort(steps, steps + n, [](const Step& a, const Step& b) { return a.stride < b.stride; });
  // How far past its first element the smaller dimensions reach: at most the view's
  // extent in elements (hi - lo, checked above), so it fits in 64 unsigned bits.
  uint64_t span = 0;
  for (int k = 0; k < n; ++k) {
    if (steps[k].stride <= span) return false;
    span += steps[k].stride * (steps[k].extent - 1);
  }
  return true;
}

// A destination's elements each need bytes of their own: the quick test first, the
// search where its dimensions interleave.
void refuse_shared_elements(const Layout& out, const char* what) {
  if (elements_disjoint(out)) return;
  const Sharing sharing = elements_share_bytes(out);
  if (sharing != Sharing::Apart)
    fail(ABR_ERR_DLPACK_STRIDES, "{}: strides {} over shape {} {}: a destination's elements need memory of their own",
         what, shape_string(out.strides), shape_string(out.shape),
         sharing == Sharing::Share ? "give two elements the same memory"
                                   : "interleave too intricately to prove that no two elements share memory");
}

}  // namespace

Layout validate_tensor(const DLTensor& t, Role role, const char* what) {
  Layout out;
  const int32_t type = static_cast<int32_t>(t.device.device_type);
  if (!is_dlpack_device_type(type)) fail(ABR_ERR_DLPACK_DEVICE, "{}: unknown device type {}", what, type);
  if (t.device.device_id < 0) fail(ABR_ERR_DLPACK_DEVICE, "{}: negative device id {}", what, t.device.device_id);
  const DeviceKind* kind = find_kind(t.device.device_type);
  if (kind && !kind->numbered && t.device.device_id != 0)
    fail(ABR_ERR_DLPACK_DEVICE, "{}: device id {} on {} memory, which has only id 0", what, t.device.device_id,
         kind->name);

  if (t.ndim < 0) fail(ABR_ERR_DLPACK_NDIM, "{}: ndim = {} is negative", what, t.ndim);
  if (t.ndim > ABR_MAX_NDIM)
    fail(ABR_ERR_DLPACK_NDIM, "{}: ndim = {} exceeds the limit of {}", what, t.ndim, ABR_MAX_NDIM);
  if (t.ndim > 0 && !t.shape) fail(ABR_ERR_DLPACK_SHAPE, "{}: shape is NULL with ndim = {}", what, t.ndim);

  validate_dtype(t.dtype, what);
  out.device = t.device;
  out.dtype = t.dtype;
  out.itemsize = itemsize(t.dtype);

  // The loops below read plain arrays (the producer's shape, the strides kept), not
  // Dims: one place to read, and one a debugger steps through without leaving it.
  const int ndim = t.ndim;
  const int64_t* shape = t.shape;
  out.shape.assign(shape, shape + ndim);
  uint64_t numel = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0) fail(ABR_ERR_DLPACK_SHAPE, "{}: shape[{}] = {} is negative", what, i, shape[i]);
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(shape[i]), &numel) || numel > INT64_MAX)
      fail(ABR_ERR_DLPACK_OVERFLOW, "{}: element count of shape {} overflows 64 bits", what, shape_string(out.shape));
  }
  out.numel = numel;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(out.itemsize), &out.nbytes) || out.nbytes > INT64_MAX)
    fail(ABR_ERR_DLPACK_OVERFLOW, "{}: byte size of shape {} x {} bytes overflows 64 bits", what,
         shape_string(out.shape), out.itemsize);

  // NULL strides mean compact; when there are no elements any strides are as good as compact.
  if (t.strides && numel > 0)
    out.strides.assign(t.strides, t.strides + ndim);
  else
    out.strides = compact_strides(out.shape);
  const int64_t* strides = out.strides.data();

  // Byte extent of the view, relative to its first element; checked for overflow.
  int64_t lo = 0, hi = 0;
  bool compact = true;
  int64_t expected = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    const int64_t extent = shape[i];
    const int64_t stride = strides[i];
    if (extent > 1 && numel > 0) {  // an empty view addresses nothing, whatever its extents
      if (stride == 0) {
        out.has_zero_stride = true;
        if (role == Role::Destination)
          fail(ABR_ERR_DLPACK_STRIDES, "{}: zero stride on dim {} of extent {}: the elements would alias", what, i,
               extent);
      }
      if (stride < 0) out.has_negative_stride = true;
      if (stride != expected) compact = false;
      int64_t span = 0, span_bytes = 0;
      if (__builtin_mul_overflow(extent - 1, stride, &span) ||
          __builtin_mul_overflow(span, static_cast<int64_t>(out.itemsize), &span_bytes) ||
          __builtin_add_overflow(span_bytes < 0 ? lo : hi, span_bytes, span_bytes < 0 ? &lo : &hi))
        fail(ABR_ERR_DLPACK_OVERFLOW,
             "{}: the producer's strides are invalid: {} elements over shape {} cannot be "
             "addressed in 64 bits (as signed byte strides, wrapping as an unsigned division would, they read {}; "
             "CuPy 13.4 to 14.2 export negative strides that way, cupy/cupy#10172)",
             what, shape_string(out.strides), shape_string(out.shape), wrapped_byte_strides(out));
    }
    if (extent > 0 && __builtin_mul_overflow(expected, extent, &expected)) expected = 0;  // only when empty
  }
  out.compact = compact;
  if (role == Role::Destination && !compact && numel > 1) refuse_shared_elements(out, what);
  if (numel > 0 && __builtin_add_overflow(hi, static_cast<int64_t>(out.itemsize), &hi))
    fail(ABR_ERR_DLPACK_OVERFLOW, "{}: view extent overflows 64 bits", what);
  out.min_byte = numel > 0 ? lo : 0;
  out.max_byte_end = numel > 0 ? hi : 0;

  out.data = t.data;
  out.byte_offset = t.byte_offset;
  if (numel > 0 && !t.data) fail(ABR_ERR_DLPACK_DATA, "{}: data is NULL but the tensor has {} elements", what, numel);
  if (numel > 0 && is_direct_address(t.device.device_type)) {
    // The whole view must lie inside the address space: data + byte_offset + [lo, hi).
    const uint64_t base = reinterpret_cast<uintptr_t>(t.data);
    uint64_t start = 0, end = 0;
    if (__builtin_add_overflow(base, t.byte_offset, &start) || start > static_cast<uint64_t>(INTPTR_MAX) ||
        0 - static_cast<uint64_t>(out.min_byte) > start ||  // |min_byte|, also for INT64_MIN (fuzzer)
        __builtin_add_overflow(start, static_cast<uint64_t>(out.max_byte_end), &end))
      fail(ABR_ERR_DLPACK_OVERFLOW, "{}: data {} + byte_offset {} puts the view outside the address space", what,
           t.data, t.byte_offset);
  } else if (numel > 0 && t.byte_offset > static_cast<uint64_t>(INT64_MAX)) {
    fail(ABR_ERR_DLPACK_OVERFLOW, "{}: byte_offset {} overflows a signed 64-bit offset", what, t.byte_offset);
  }
  return out;
}

}  // namespace abr
