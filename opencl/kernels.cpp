#include "opencl/kernels.hpp"

#include <fmt/format.h>

#include <vector>

#include "lib/devices/devices.hpp"
#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"

namespace abr::opencl {
namespace {

// The index walk shared by every kernel: element i of the row-major iteration
// over geometry's extents, turned into byte offsets on both sides.
constexpr const char* kWalk = R"CL(
#define ABR_WALK(i, s, d)                                                   \
  long s = src_first, d = dst_first;                                        \
  {                                                                         \
    ulong rest = i;                                                         \
    for (int k = ndim - 1; k >= 0; --k) {                                   \
      const ulong n = (ulong)geometry[k];                                   \
      const long idx = (long)(rest % n);                                    \
      rest /= n;                                                            \
      s += idx * geometry[ndim + k];                                        \
      d += idx * geometry[2 * ndim + k];                                    \
    }                                                                       \
  }
#define ABR_ARGS __global const uchar* src, long src_first, __global uchar* dst, long dst_first, \
                 __global const long* geometry, int ndim, ulong count
)CL";

constexpr const char* kCopyKernels = R"CL(
#define ABR_COPY_KERNEL(name, T)                                            \
  __kernel void name(ABR_ARGS, int units) {                                 \
    const ulong i = get_global_id(0);                                       \
    if (i >= count) return;                                                 \
    ABR_WALK(i, s, d)                                                       \
    __global const T* from = (__global const T*)(src + s);                  \
    __global T* to = (__global T*)(dst + d);                                \
    for (int u = 0; u < units; ++u) to[u] = from[u];                        \
  }
ABR_COPY_KERNEL(abr_copy_1, uchar)
ABR_COPY_KERNEL(abr_copy_2, ushort)
ABR_COPY_KERNEL(abr_copy_4, uint)
ABR_COPY_KERNEL(abr_copy_8, ulong)
)CL";

// `wide` narrowed to a float rounded to odd, for a half or bfloat16 destination: a double
// then rounds once (as double_to_float_odd in lib/tensor/half_bits.hpp); a float stays itself.
// An integer goes to its float rounded to odd directly (integer_to_float_odd there): through
// `wide` an int64 rounded twice, and without fp64 an int32 too.
// A NaN becomes the host cast's quiet half NaN with its sign (vstore_half's is the driver's:
// PoCL's 0x7fff).
constexpr const char* kNarrow = R"CL(
static float abr_narrow(wide v) {
  const float f = (float)v;
  if (isnan(v) || (wide)f == v) return f;
  uint bits = as_uint(f);
  if (fabs((wide)f) > fabs(v)) bits -= 1u;
  return as_float(bits | 1u);
}
static float abr_magnitude_odd(ulong m, int negative) {
  if (m < (1ul << 24)) return negative ? -(float)(uint)m : (float)(uint)m;  // exact
  const int shift = max(0, 40 - (int)clz(m));
  ulong kept = m >> shift;
  if ((kept << shift) != m) kept |= 1ul;
  const float f = (float)(uint)kept * as_float((uint)(127 + shift) << 23);
  return negative ? -f : f;
}
static float abr_signed_odd(long v) { return abr_magnitude_odd(v < 0 ? (ulong)0 - (ulong)v : (ulong)v, v < 0); }
static float abr_unsigned_odd(ulong v) { return abr_magnitude_odd(v, 0); }
static void abr_store_half(wide v, __global ushort* d) {
  if (isnan(v)) *d = signbit(v) ? (ushort)0xFE00u : (ushort)0x7E00u;
  else vstore_half_rte(abr_narrow(v), 0, (__global half*)d);
}
)CL";

// bfloat16 by hand, rounding to nearest even and keeping NaN quiet, as lib/host/host_cast.cpp.
constexpr const char* kBfloat16 = R"CL(
static float abr_bf16_to_float(ushort b) { return as_float((uint)b << 16); }
static ushort abr_float_to_bf16(float f) {
  uint bits = as_uint(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (ushort)((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (ushort)(bits >> 16);
}
)CL";

enum class Kind { Bool, Signed, Unsigned, Half, BFloat16, Float, Complex };

struct TypeInfo {
  Kind kind;
  const char* storage;  // OpenCL C type holding one element
  const char* real;     // complex: the component type
};

TypeInfo type_info(DLDataType t) {
  switch (t.code) {
    case kDLBool: return {Kind::Bool, "uchar", nullptr};
    case kDLInt:
      return {Kind::Signed, t.bits == 8 ? "char" : t.bits == 16 ? "short" : t.bits == 32 ? "int" : "long", nullptr};
    case kDLUInt:
      return {Kind::Unsigned,
              t.bits == 8        ? "uchar"
                  : t.bits == 16 ? "ushort"
                  : t.bits == 32 ? "uint"
                                 : "ulong",
              nullptr};
    case kDLFloat:
      if (t.bits == 16) return {Kind::Half, "ushort", nullptr};
      return {Kind::Float, t.bits == 32 ? "float" : "double", nullptr};
    case kDLBfloat: return {Kind::BFloat16, "ushort", nullptr};
    case kDLComplex:
      return t.bits == 64 ? TypeInfo{Kind::Complex, "float2", "float"} : TypeInfo{Kind::Complex, "double2", "double"};
    default: fail(ABR_ERR_UNSUPPORTED, "no device conversion for {}", dtype_name(t));
  }
}

bool integral(Kind k) { return k == Kind::Bool || k == Kind::Signed || k == Kind::Unsigned; }

// The statement converting *s into *d, mirroring convert<D>(S) in lib/host/host_cast.cpp.
std::string convert_statement(const TypeInfo& s, const TypeInfo& d) {
  // The source's value as `wide` (complex: its real part), its imaginary part, and != 0.
  std::string value, imag = "(wide)0", nonzero;
  switch (s.kind) {
    case Kind::Bool:
      value = "(*s ? (wide)1 : (wide)0)";
      nonzero = "(*s != 0)";
      break;
    case Kind::Signed:
    case Kind::Unsigned:
    case Kind::Float:
      value = "(wide)*s";
      nonzero = "(*s != 0)";
      break;
    case Kind::Half:
      value = "(wide)vload_half(0, (__global const half*)s)";
      nonzero = "(" + value + " != 0)";
      break;
    case Kind::BFloat16:
      value = "(wide)abr_bf16_to_float(*s)";
      nonzero = "(" + value + " != 0)";
      break;
    case Kind::Complex:
      value = "(wide)s->x";
      imag = "(wide)s->y";
      nonzero = "(s->x != 0 || s->y != 0)";
      break;
  }
  const bool from_integer = s.kind == Kind::Signed || s.kind == Kind::Unsigned;
  if (from_integer && (d.kind == Kind::Half || d.kind == Kind::BFloat16))
    value = s.kind == Kind::Signed ? "(wide)abr_signed_odd((long)*s)" : "(wide)abr_unsigned_odd((ulong)*s)";
  switch (d.kind) {
    case Kind::Bool: return "*d = " + nonzero + " ? 1 : 0;";
    case Kind::Complex:
      if (from_integer) return fmt::format("d->x = ({})*s; d->y = 0;", d.real);  // directly, as integer to float
      return fmt::format("d->x = ({0}){1}; d->y = ({0}){2};", d.real, value, imag);
    case Kind::Half: return "abr_store_half(" + value + ", d);";
    case Kind::BFloat16: return "*d = abr_float_to_bf16(abr_narrow(" + value + "));";
    case Kind::Signed:
    case Kind::Unsigned:
      if (s.kind == Kind::Bool) return fmt::format("*d = ({})(*s ? 1 : 0);", d.storage);
      if (integral(s.kind)) return fmt::format("*d = ({})*s;", d.storage);  // modular, as in C
      // Saturating, and NaN -> 0 spelled out: OpenCL C only says NaN "should" become 0,
      // and NVIDIA's compiler gives the type's minimum.
      return fmt::format("{{ const wide v = {1}; *d = isnan(v) ? ({0})0 : convert_{0}_sat(v); }}", d.storage, value);
    case Kind::Float:
      if (from_integer) return fmt::format("*d = ({})*s;", d.storage);
      return fmt::format("*d = ({}){};", d.storage, value);
  }
  return "";
}

int64_t product(const std::vector<Dim>& dims) {
  int64_t n = 1;
  for (const Dim& dim : dims) n *= dim.n;
  return n;
}

// The largest unit (1, 2, 4 or 8 bytes) dividing every offset, stride and the item size.
std::size_t copy_unit(const StridedCopy& walk, std::size_t itemsize) {
  uint64_t bits = itemsize | static_cast<uint64_t>(walk.src) | static_cast<uint64_t>(walk.dst);
  for (const Dim& dim : walk.dims) bits |= static_cast<uint64_t>(dim.ss) | static_cast<uint64_t>(dim.ds);
  for (std::size_t unit = 8; unit > 1; unit /= 2)
    if (bits % unit == 0) return unit;
  return 1;
}

bool aligned_to(const StridedCopy& walk, std::size_t src_item, std::size_t dst_item) {
  if (walk.src % static_cast<intptr_t>(src_item) || walk.dst % static_cast<intptr_t>(dst_item)) return false;
  for (const Dim& dim : walk.dims)
    if (dim.ss % static_cast<int64_t>(src_item) || dim.ds % static_cast<int64_t>(dst_item)) return false;
  return true;
}

}  // namespace

std::string copy_program_source() { return std::string(kWalk) + kCopyKernels; }

std::string cast_program_source(DLDataType from, DLDataType to, bool fp64) {
  const TypeInfo s = type_info(from), d = type_info(to);
  std::string text =
      fp64 ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\ntypedef double wide;\n" : "typedef float wide;\n";
  text += kWalk;
  text += kBfloat16;
  if (d.kind == Kind::Half || d.kind == Kind::BFloat16) text += kNarrow;
  text += fmt::format(R"CL(
__kernel void abr_cast(ABR_ARGS) {{
  const ulong i = get_global_id(0);
  if (i >= count) return;
  ABR_WALK(i, so, dof)
  __global const {0}* s = (__global const {0}*)(src + so);
  __global {1}* d = (__global {1}*)(dst + dof);
  {2}
}}
)CL",
                      s.storage, d.storage, convert_statement(s, d));
  return text;
}

void enqueue_strided_copy(Context& context, cl_command_queue queue, cl_mem src, cl_mem dst, const StridedCopy& walk,
                          DLDataType from, DLDataType to) {
  if (walk.empty) return;
  const bool cast = !same_dtype(from, to);
  const std::size_t src_item = itemsize(from), dst_item = itemsize(to);
  cl_program program;
  std::string name;
  cl_int units = 0;
  if (cast) {
    if ((needs_double_precision(from) || needs_double_precision(to)) && !context.has_fp64())
      fail(ABR_ERR_UNSUPPORTED, "{} has no double precision (cl_khr_fp64) for {} -> {}",
           device_string(context.dl_device()), dtype_name(from), dtype_name(to));
    if (!aligned_to(walk, src_item, dst_item))
      fail(ABR_ERR_UNSUPPORTED, "{} -> {} on {}: the device converts element-aligned data only", dtype_name(from),
           dtype_name(to), device_string(context.dl_device()));
    program = context.program(fmt::format("cast {} -> {}", dtype_name(from), dtype_name(to)),
                              [&] { return cast_program_source(from, to, context.has_fp64()); });
    name = "abr_cast";
  } else {
    const std::size_t unit = copy_unit(walk, src_item);
    program = context.program("strided copy", copy_program_source);
    name = fmt::format("abr_copy_{}", unit);
    units = static_cast<cl_int>(src_item / unit);
  }

  const Api& cl = context.api();
  // Geometry: extents, then source strides, then destination strides (bytes).
  std::vector<cl_long> geometry;
  for (const Dim& dim : walk.dims) geometry.push_back(dim.n);
  for (const Dim& dim : walk.dims) geometry.push_back(dim.ss);
  for (const Dim& dim : walk.dims) geometry.push_back(dim.ds);
  if (geometry.empty()) geometry.push_back(0);  // a 0-d walk still needs a buffer
  MemRef geometry_buffer = context.create_buffer(CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                                 geometry.size() * sizeof(cl_long), geometry.data());

  cl_int status = CL_SUCCESS;
  Ref<cl_kernel> kernel(cl.CreateKernel(program, name.c_str(), &status), cl.ReleaseKernel);
  check(status, "clCreateKernel");
  const cl_long src_first = walk.src, dst_first = walk.dst;
  const cl_int ndim = static_cast<cl_int>(walk.dims.size());
  const cl_ulong count = static_cast<cl_ulong>(product(walk.dims));
  cl_mem geometry_mem = geometry_buffer.get();
  cl_kernel k = kernel.get();
  check(cl.SetKernelArg(k, 0, sizeof src, &src), "clSetKernelArg");
  check(cl.SetKernelArg(k, 1, sizeof src_first, &src_first), "clSetKernelArg");
  check(cl.SetKernelArg(k, 2, sizeof dst, &dst), "clSetKernelArg");
  check(cl.SetKernelArg(k, 3, sizeof dst_first, &dst_first), "clSetKernelArg");
  check(cl.SetKernelArg(k, 4, sizeof geometry_mem, &geometry_mem), "clSetKernelArg");
  check(cl.SetKernelArg(k, 5, sizeof ndim, &ndim), "clSetKernelArg");
  check(cl.SetKernelArg(k, 6, sizeof count, &count), "clSetKernelArg");
  if (!cast) check(cl.SetKernelArg(k, 7, sizeof units, &units), "clSetKernelArg");
  const std::size_t global = static_cast<std::size_t>(count);
  check(cl.EnqueueNDRangeKernel(queue, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr), "clEnqueueNDRangeKernel");
  // The kernel and geometry buffer are released here; OpenCL keeps them until the command has run.
}

}  // namespace abr::opencl
