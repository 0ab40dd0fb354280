#include "lib/host/host_cast.hpp"

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"

namespace abr {

namespace {

// Storage types that are not C++ arithmetic types.
struct Bool8 {
  uint8_t v;
};
struct Half {
  uint16_t v;
};
struct BFloat16 {
  uint16_t v;
};

template <class T>
struct is_complex : std::false_type {};
template <class T>
struct is_complex<std::complex<T>> : std::true_type {};

template <class T>
constexpr bool is_integral_like = std::is_integral_v<T> || std::is_same_v<T, Bool8>;

// Value of any supported element as a double (complex: its real part).
template <class S>
double as_double(S s) {
  if constexpr (std::is_same_v<S, Bool8>)
    return s.v ? 1.0 : 0.0;
  else if constexpr (std::is_same_v<S, Half>)
    return half_to_float(s.v);
  else if constexpr (std::is_same_v<S, BFloat16>)
    return bfloat16_to_float(s.v);
  else if constexpr (is_complex<S>::value)
    return static_cast<double>(s.real());
  else
    return static_cast<double>(s);
}

// Value of any supported element as a float rounded to odd, from which half and
// bfloat16 round once (an integer does not pass through a double: see half_bits.hpp).
template <class S>
float as_float_odd(S s) {
  if constexpr (std::is_integral_v<S> && sizeof(S) == 8)
    return integer_to_float_odd(s);
  else
    return double_to_float_odd(as_double(s));  // narrower integers: exact as doubles
}

template <class S>
std::complex<double> as_complex(S s) {
  if constexpr (is_complex<S>::value)
    return {static_cast<double>(s.real()), static_cast<double>(s.imag())};
  else
    return {as_double(s), 0.0};
}

template <class S>
bool is_nonzero(S s) {
  if constexpr (std::is_same_v<S, Bool8>)
    return s.v != 0;
  else if constexpr (is_complex<S>::value)
    return s.real() != 0 || s.imag() != 0;
  else if constexpr (std::is_integral_v<S>)
    return s != 0;
  else
    return as_double(s) != 0.0;
}

// Float to integer without undefined behaviour: saturate, NaN -> 0.
template <class D>
D saturate(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
  if (v >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

template <class D, class S>
D convert(S s) {
  if constexpr (std::is_same_v<D, Bool8>) {
    return Bool8{static_cast<uint8_t>(is_nonzero(s) ? 1 : 0)};
  } else if constexpr (is_complex<D>::value) {
    using R = typename D::value_type;
    if constexpr (std::is_integral_v<S>) {
      return D(static_cast<R>(s), R{0});  // directly, as integer to float
    } else {
      const std::complex<double> c = as_complex(s);
      return D(static_cast<R>(c.real()), static_cast<R>(c.imag()));
    }
  } else if constexpr (std::is_integral_v<D> && is_integral_like<S>) {
    if constexpr (std::is_same_v<S, Bool8>)
      return static_cast<D>(s.v ? 1 : 0);
    else
      return static_cast<D>(s);  // modular, as in C and NumPy
  } else if constexpr (std::is_integral_v<D>) {
    return saturate<D>(as_double(s));
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{float_to_half(as_float_odd(s))};  // rounded once, as NumPy's astype
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return BFloat16{float_to_bfloat16(as_float_odd(s))};
  } else if constexpr (std::is_integral_v<S>) {
    return static_cast<D>(s);  // integer to float directly, no double rounding for float32
  } else {
    return static_cast<D>(as_double(s));
  }
}

template <class S, class D>
void cast_row(const char* src, int64_t ss, char* dst, int64_t ds, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    S s;
    std::memcpy(&s, src + i * ss, sizeof s);  // memcpy: elements may be unaligned
    const D d = convert<D>(s);
    std::memcpy(dst + i * ds, &d, sizeof d);
  }
}

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>) for the storage type of a dtype; returns false if there is none.
template <class F>
bool visit(DLDataType t, F&& f) {
  switch (t.code) {
    case kDLBool: return t.bits == 8 && (f(Tag<Bool8>{}), true);
    case kDLInt:
      switch (t.bits) {
        case 8: return f(Tag<int8_t>{}), true;
        case 16: return f(Tag<int16_t>{}), true;
        case 32: return f(Tag<int32_t>{}), true;
        case 64: return f(Tag<int64_t>{}), true;
      }
      return false;
    case kDLUInt:
      switch (t.bits) {
        case 8: return f(Tag<uint8_t>{}), true;
        case 16: return f(Tag<uint16_t>{}), true;
        case 32: return f(Tag<uint32_t>{}), true;
        case 64: return f(Tag<uint64_t>{}), true;
      }
      return false;
    case kDLFloat:
      switch (t.bits) {
        case 16: return f(Tag<Half>{}), true;
        case 32: return f(Tag<float>{}), true;
        case 64: return f(Tag<double>{}), true;
      }
      return false;
    case kDLBfloat: return t.bits == 16 && (f(Tag<BFloat16>{}), true);
    case kDLComplex:
      switch (t.bits) {
        case 64: return f(Tag<std::complex<float>>{}), true;
        case 128: return f(Tag<std::complex<double>>{}), true;
      }
      return false;
    default: return false;
  }
}

}  // namespace

CastRowFn cast_row_or_null(DLDataType from, DLDataType to) {
  if (from.lanes != 1 || to.lanes != 1) return nullptr;
  CastRowFn fn = nullptr;
  visit(from, [&](auto s) {
    visit(to, [&](auto d) { fn = &cast_row<typename decltype(s)::type, typename decltype(d)::type>; });
  });
  return fn;
}

CastRowFn cast_row_for(DLDataType from, DLDataType to) {
  CastRowFn fn = cast_row_or_null(from, to);
  if (!fn) fail(ABR_ERR_UNSUPPORTED, "no conversion from {} to {}", dtype_name(from), dtype_name(to));
  return fn;
}

}  // namespace abr
