// Every legal layout copies correctly, compared element by
// element with a reference reader, through abr_copy and abr_to_device.
#include <cmath>
#include <complex>
#include <limits>
#include <random>

#include "lib/host/host_cast.hpp"
#include "tests/support/helpers.hpp"

using namespace test;

namespace {

struct Layout {
  const char* name;
  std::vector<int64_t> shape, strides;  // strides in elements, relative to `first`
  int64_t first;                        // element index of the view's first element in the buffer
};

// Layouts over a buffer of at least 4096 elements.
std::vector<Layout> layouts() {
  return {
      {"contiguous 1-d", {1000}, {1}, 0},
      {"contiguous 3-d", {4, 5, 6}, {30, 6, 1}, 0},
      {"transposed 37x53", {37, 53}, {1, 37}, 0},
      {"transposed 64x64", {64, 64}, {1, 64}, 0},
      {"3-d permuted (2,0,1)", {6, 4, 5}, {1, 30, 6}, 0},
      {"step-2 slice", {20, 30}, {60, 2}, 0},
      {"row slice", {10, 7}, {40, 1}, 3},
      {"negative stride", {100}, {-1}, 99},
      {"negative rows", {8, 9}, {-9, 1}, 63},
      {"both negative", {8, 9}, {-9, -1}, 71},
      {"negative transposed", {30, 40}, {-1, -30}, 1199},
      {"zero stride (broadcast)", {5, 7}, {0, 1}, 0},
      {"size-1 dims with odd strides", {1, 12, 1}, {77, 1, -5}, 0},
      {"0-d", {}, {}, 17},
      {"zero-size", {4, 0, 3}, {0, 0, 0}, 0},
  };
}

// Fills with distinct bytes so a misplaced element cannot compare equal.
std::vector<unsigned char> pattern(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  std::mt19937 rng(1234);
  for (auto& b : buffer) b = static_cast<unsigned char>(rng());
  return buffer;
}

}  // namespace

TEST_CASE("abr_copy from every legal layout into a compact tensor, for every element size") {
  Runtime rt;
  const DLDataType types[] = {u8, dt(kDLInt, 16), f32, f64, dt(kDLComplex, 128)};
  for (DLDataType type : types) {
    const std::size_t item = type.bits / 8;
    for (const Layout& layout : layouts()) {
      for (int misalign : {0, 1}) {
        const std::string name = layout.name;
        CAPTURE(name);
        CAPTURE(type.bits);
        CAPTURE(misalign);
        auto source = pattern(4096 * item + 1);
        DLTensor src{source.data() + misalign,
                     cpu,
                     static_cast<int32_t>(layout.shape.size()),
                     type,
                     const_cast<int64_t*>(layout.shape.data()),
                     const_cast<int64_t*>(layout.strides.data()),
                     static_cast<uint64_t>(layout.first) * item};
        if (layout.shape.empty()) src.shape = src.strides = nullptr;
        std::vector<unsigned char> target(4096 * item, 0);
        DLTensor dst = src;
        dst.data = target.data();
        dst.strides = nullptr;  // compact
        dst.byte_offset = 0;
        REQUIRE_MESSAGE(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
        CHECK(same_elements(src, dst, item));
      }
    }
  }
}

TEST_CASE("abr_copy scatters a compact source into strided, negative and offset destinations") {
  Runtime rt;
  for (const Layout& layout : layouts()) {
    bool aliasing = false;
    for (std::size_t i = 0; i < layout.shape.size(); ++i)
      if (layout.shape[i] > 1 && layout.strides[i] == 0) aliasing = true;
    if (aliasing) continue;  // refused for destinations: see below
    const std::string name = layout.name;
    CAPTURE(name);
    auto source = pattern(4096 * 4);
    DLTensor src{
        source.data(), cpu, static_cast<int32_t>(layout.shape.size()), f32, const_cast<int64_t*>(layout.shape.data()),
        nullptr,       0};
    if (layout.shape.empty()) src.shape = nullptr;
    std::vector<unsigned char> target(4096 * 4, 0);
    DLTensor dst = src;
    dst.data = target.data();
    dst.strides = layout.shape.empty() ? nullptr : const_cast<int64_t*>(layout.strides.data());
    dst.byte_offset = static_cast<uint64_t>(layout.first) * 4;
    REQUIRE_MESSAGE(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
    CHECK(same_elements(src, dst, 4));
  }
}

TEST_CASE("abr_copy refuses what it cannot honour, naming it") {
  Runtime rt;
  float a[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, b[12] = {};
  int64_t shape[2] = {3, 4}, other[2] = {4, 3}, zero[2] = {0, 1};
  DLTensor src{a, cpu, 2, f32, shape, nullptr, 0};
  DLTensor dst{b, cpu, 2, f32, other, nullptr, 0};
  CHECK(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_ERR_SHAPE_MISMATCH);
  CHECK(error_mentions("[3, 4] differs from destination shape [4, 3]"));
  dst.shape = shape;
  dst.strides = zero;
  CHECK(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_ERR_DLPACK_STRIDES);
  CHECK(error_mentions("destination: zero stride on dim 0"));

  // Non-zero strides that alias: element (0, 1) and (1, 0) are both b[1]. Until
  // 2026-11-25 this was accepted and the copy kept whichever value came last.
  int64_t aliasing[2] = {1, 1};
  dst.strides = aliasing;
  CHECK(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_ERR_DLPACK_STRIDES);
  CHECK(error_mentions("destination: strides [1, 1] over shape [3, 4] give two elements the same memory"));
  {  // strides at the ends of 64 bits, found in review: judged in unsigned arithmetic, without overflow
    int8_t bytes[8] = {};
    int64_t one[1] = {2}, far[1] = {INT64_MIN}, cube[3] = {2, 2, 2}, wide[3] = {-2, INT64_MAX - 1, -(INT64_MAX - 1)};
    DLTensor from{bytes, cpu, 1, dt(kDLInt, 8), one, nullptr, 0}, into{bytes, cpu, 1, dt(kDLInt, 8), one, far, 0};
    CHECK(abr_copy(rt, &from, &into, nullptr, nullptr) == ABR_ERR_DLPACK_OVERFLOW);  // disjoint, out of the space
    from.ndim = into.ndim = 3;
    from.shape = into.shape = cube;
    into.strides = wide;  // (0, 1, 1) and (0, 0, 0) are the same byte: the sum of spans wraps a signed 64 bits
    CHECK(abr_copy(rt, &from, &into, nullptr, nullptr) == ABR_ERR_DLPACK_STRIDES);
  }
  src.strides = aliasing;  // a source may alias: reading an element twice changes nothing
  dst.strides = nullptr;
  CHECK(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_OK);
  CHECK((b[1] == 1 && b[4] == 1 && b[7] == 4 && b[11] == 5));
  src.strides = nullptr;

  Managed ms(a, f32, {3, 4}), md(b, f32, {3, 4});
  md.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  CHECK(abr_copy_versioned(rt, &ms.managed, &md.managed, nullptr, nullptr) == ABR_ERR_READ_ONLY);
  CHECK(error_mentions("READ_ONLY"));
  md.managed.flags = 0;
  a[5] = 42;
  CHECK(abr_copy_versioned(rt, &ms.managed, &md.managed, nullptr, nullptr) == ABR_OK);
  CHECK(b[5] == 42);
  CHECK(ms.deleted + md.deleted == 0);  // borrowed, never deleted
}

TEST_CASE("abr_copy between overlapping views behaves as if through a temporary") {
  Runtime rt;
  int32_t data[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  int64_t shape[1] = {8};
  DLTensor src{data, cpu, 1, i32, shape, nullptr, 0};
  DLTensor dst{data, cpu, 1, i32, shape, nullptr, 2 * sizeof(int32_t)};  // shift right by two
  REQUIRE(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_OK);
  const int32_t expected[10] = {0, 1, 0, 1, 2, 3, 4, 5, 6, 7};
  for (int i = 0; i < 10; ++i) CHECK(data[i] == expected[i]);
  // In-place reversal.
  int32_t rev[6] = {1, 2, 3, 4, 5, 6};
  int64_t six[1] = {6}, minus[1] = {-1};
  DLTensor forward{rev, cpu, 1, i32, six, nullptr, 0};
  DLTensor backward{rev, cpu, 1, i32, six, minus, 5 * sizeof(int32_t)};
  REQUIRE(abr_copy(rt, &forward, &backward, nullptr, nullptr) == ABR_OK);
  for (int i = 0; i < 6; ++i) CHECK(rev[i] == 6 - i);
}

TEST_CASE("to_device copies of strided sources equal the reference") {
  Runtime rt;
  for (const Layout& layout : layouts()) {
    const std::string name = layout.name;
    CAPTURE(name);
    auto source = pattern(4096 * 8);
    Managed m(source.data(), f64, layout.shape, layout.strides, static_cast<uint64_t>(layout.first) * 8);
    if (layout.shape.empty()) m.tensor().strides = nullptr;
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.copy = ABR_COPY_ALWAYS;
    DLManagedTensorVersioned* out = nullptr;
    REQUIRE_MESSAGE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK,
                    std::string(abr_last_error()));
    CHECK(same_elements(m.tensor(), out->dl_tensor, 8));
    out->deleter(out);
    CHECK(m.deleted == 1);
  }
}

TEST_CASE("half and bfloat16 conversions round to nearest even and keep specials") {
  using abr::bfloat16_to_float;
  using abr::float_to_bfloat16;
  using abr::float_to_half;
  using abr::half_to_float;
  CHECK(float_to_half(1.0f) == 0x3C00);
  CHECK(float_to_half(-2.0f) == 0xC000);
  CHECK(float_to_half(65504.0f) == 0x7BFF);
  CHECK(float_to_half(65520.0f) == 0x7C00);                // rounds to infinity
  CHECK(float_to_half(5.960464477539063e-08f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half(1.0f + 1.0f / 2048) == 0x3C00);      // tie goes to even
  CHECK(float_to_half(1.0f + 3.0f / 2048) == 0x3C02);
  CHECK(float_to_half(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  for (uint32_t h = 0; h < 0x7C00; ++h) CHECK(float_to_half(half_to_float(static_cast<uint16_t>(h))) == h);
  CHECK(float_to_bfloat16(1.0f) == 0x3F80);
  CHECK(bfloat16_to_float(0x4049) == 3.140625f);
  CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
}

// Through a float rounded to nearest these rounded twice (1.0, 613.0, 0, 1.0, and 1.0 for the last).
TEST_CASE("a double narrows to half and bfloat16 rounding once, as NumPy's astype") {
  auto double_to_half = [](double d) { return abr::float_to_half(abr::double_to_float_odd(d)); };  // as the casts
  auto double_to_bfloat16 = [](double d) { return abr::float_to_bfloat16(abr::double_to_float_odd(d)); };
  CHECK(double_to_half(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)) == 0x3C01);
  CHECK(double_to_half(-(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))) == 0xBC01);
  CHECK(double_to_half(612.7499994) == 0x60C9);                                  // 612.5
  CHECK(double_to_half(std::ldexp(1.0, -25) + std::ldexp(1.0, -60)) == 0x0001);  // up to the smallest subnormal
  CHECK(double_to_half(std::ldexp(1.0, -25)) == 0x0000);                         // a tie, to even
  CHECK(double_to_half(1.0 + std::ldexp(1.0, -11)) == 0x3C00);                   // a tie, to even
  CHECK(double_to_half(65519.99) == 0x7BFF);                                     // below the tie to infinity
  CHECK(double_to_half(1e300) == 0x7C00);
  CHECK(double_to_half(std::numeric_limits<double>::infinity()) == 0x7C00);
  CHECK((double_to_half(std::nan("")) & 0x7E00) == 0x7E00);
  CHECK(double_to_bfloat16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)) == 0x3F81);
  CHECK(double_to_bfloat16(1.0 + std::ldexp(1.0, -8)) == 0x3F80);  // a tie, to even
  CHECK(double_to_bfloat16(1e300) == 0x7F80);
  for (uint32_t h = 0; h < 0x7C00; ++h)  // every finite half is itself
    CHECK(double_to_half(abr::half_to_float(static_cast<uint16_t>(h))) == h);
}

// Through its double (53 bits) an int64 above 2^53 rounded twice: 2^60 + 2^52 + 1 became the
// tie 2^60 + 2^52, then 2^60 (0x5D80), where once rounded it is 2^60 + 2^53.
TEST_CASE("an integer narrows to a float rounded to odd without a double between") {
  using abr::float_to_bfloat16;
  using abr::integer_to_float_odd;
  const int64_t above_tie = (int64_t{1} << 60) + (int64_t{1} << 52) + 1;
  CHECK(float_to_bfloat16(integer_to_float_odd(above_tie)) == 0x5D81);
  CHECK(float_to_bfloat16(integer_to_float_odd(-above_tie)) == 0xDD81);
  CHECK(float_to_bfloat16(integer_to_float_odd(above_tie - 1)) == 0x5D80);                        // the tie, to even
  CHECK(float_to_bfloat16(integer_to_float_odd(~uint64_t{0})) == 0x5F80);                         // 2^64
  CHECK(float_to_bfloat16(integer_to_float_odd(std::numeric_limits<int64_t>::min())) == 0xDF00);  // -2^63
  CHECK(integer_to_float_odd(int64_t{0}) == 0.0f);
  CHECK(integer_to_float_odd(int64_t{-16777215}) == -16777215.0f);       // 24 bits: exact
  CHECK(integer_to_float_odd(uint64_t{16777217}) == 16777218.0f);        // 25 bits: 2^24 + 1 -> odd above
  CHECK(integer_to_float_odd(uint64_t{(1u << 25) + 2}) == 33554436.0f);  // dropped bit set: odd
}

TEST_CASE("conversions: saturation, NaN, bool and complex follow the documented rules") {
  Runtime rt;
  abr_transfer_options unsafe = ABR_TRANSFER_OPTIONS_INIT;
  unsafe.casting = ABR_CASTING_UNSAFE;  // a copy's default (same_kind) refuses most of these
  auto convert = [&](const void* in, DLDataType from, void* out, DLDataType to, int64_t n) {
    int64_t shape[1] = {n};
    DLTensor src{const_cast<void*>(in), cpu, 1, from, shape, nullptr, 0};
    DLTensor dst{out, cpu, 1, to, shape, nullptr, 0};
    REQUIRE_MESSAGE(abr_copy(rt, &src, &dst, &unsafe, nullptr) == ABR_OK, std::string(abr_last_error()));
  };
  const double big[5] = {1e30, -1e30, std::nan(""), 2.9, -2.9};
  int8_t small[5];
  convert(big, f64, small, dt(kDLInt, 8), 5);
  CHECK(small[0] == 127);
  CHECK(small[1] == -128);
  CHECK(small[2] == 0);
  CHECK(small[3] == 2);
  CHECK(small[4] == -2);
  uint32_t unsigned_[2];
  const double negative[2] = {-5.0, 5e9};
  convert(negative, f64, unsigned_, dt(kDLUInt, 32), 2);
  CHECK(unsigned_[0] == 0);
  CHECK(unsigned_[1] == 4294967295u);
  const float floats[3] = {0.0f, -0.5f, 3.0f};
  uint8_t bools[3];
  convert(floats, f32, bools, dt(kDLBool, 8), 3);
  CHECK(bools[0] == 0);
  CHECK(bools[1] == 1);
  CHECK(bools[2] == 1);
  const std::complex<float> c[2] = {{1.5f, 2.0f}, {-3.0f, 0.0f}};
  double re[2];
  convert(c, dt(kDLComplex, 64), re, f64, 2);
  CHECK(re[0] == 1.5);
  CHECK(re[1] == -3.0);
  std::complex<double> back[2];
  convert(c, dt(kDLComplex, 64), back, dt(kDLComplex, 128), 2);
  CHECK(back[0] == std::complex<double>(1.5, 2.0));
  const int64_t wide[2] = {257, -1};
  uint8_t narrow[2];
  convert(wide, dt(kDLInt, 64), narrow, u8, 2);
  CHECK(narrow[0] == 1);  // integers wrap, as in C and NumPy
  CHECK(narrow[1] == 255);
  uint16_t halves[2];
  convert(floats + 1, f32, halves, dt(kDLFloat, 16), 2);
  CHECK(halves[0] == 0xB800);
  CHECK(halves[1] == 0x4200);
}

TEST_CASE("a copy casts within a kind or up by default, as NumPy's copyto; casting picks NumPy's other rules") {
  Runtime rt;
  const DLDataType f16 = dt(kDLFloat, 16), bf16 = dt(kDLBfloat, 16), c128 = dt(kDLComplex, 128), i8 = dt(kDLInt, 8),
                   i16 = dt(kDLInt, 16), i64 = dt(kDLInt, 64), u32 = dt(kDLUInt, 32), b8 = dt(kDLBool, 8);
  // One element of `from` (its bytes `value`) into a destination of `to` under `casting`:
  // the status, and the destination's bytes untouched (0xAB) when refused.
  auto copy_one = [&](DLDataType from, uint64_t value, DLDataType to, abr_casting casting, uint64_t* out = nullptr) {
    int64_t shape[1] = {1};
    unsigned char source[16] = {}, target[16];
    std::memcpy(source, &value, sizeof value);
    std::memset(target, 0xAB, sizeof target);
    DLTensor src{source, cpu, 1, from, shape, nullptr, 0}, dst{target, cpu, 1, to, shape, nullptr, 0};
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    options.casting = casting;
    const abr_status status = abr_copy(rt, &src, &dst, &options, nullptr);
    if (status != ABR_OK) CHECK(target[0] == 0xAB);
    if (out) std::memcpy(out, target, sizeof *out);
    return status;
  };
  const uint64_t two_and_a_half = 0x4004000000000000;  // 2.5 as a double
  struct Row {
    DLDataType from, to;
    abr_casting casting;
    abr_status expected;
  };
  const Row rows[] = {
      // The default: within a kind or up, narrowing allowed (NumPy's copyto).
      {f64, f32, ABR_CASTING_DEFAULT, ABR_OK},
      {i64, i8, ABR_CASTING_DEFAULT, ABR_OK},
      {u8, i8, ABR_CASTING_DEFAULT, ABR_OK},
      {i32, f16, ABR_CASTING_DEFAULT, ABR_OK},
      {b8, f32, ABR_CASTING_DEFAULT, ABR_OK},
      {f64, i32, ABR_CASTING_DEFAULT, ABR_ERR_CASTING},
      {c128, f64, ABR_CASTING_DEFAULT, ABR_ERR_CASTING},
      {i8, u8, ABR_CASTING_DEFAULT, ABR_ERR_CASTING},
      {i32, b8, ABR_CASTING_DEFAULT, ABR_ERR_CASTING},
      {bf16, i16, ABR_CASTING_DEFAULT, ABR_ERR_CASTING},
      // safe: every value of the source's dtype fits.
      {i16, f32, ABR_CASTING_SAFE, ABR_OK},
      {i32, f32, ABR_CASTING_SAFE, ABR_ERR_CASTING},
      {u8, bf16, ABR_CASTING_SAFE, ABR_OK},
      {i16, bf16, ABR_CASTING_SAFE, ABR_ERR_CASTING},
      {f16, f32, ABR_CASTING_SAFE, ABR_OK},
      {f16, bf16, ABR_CASTING_SAFE, ABR_ERR_CASTING},  // bfloat16 has fewer digits
      {bf16, f16, ABR_CASTING_SAFE, ABR_ERR_CASTING},  // float16 has less range
      {bf16, f32, ABR_CASTING_SAFE, ABR_OK},
      {u32, i64, ABR_CASTING_SAFE, ABR_OK},
      {u32, i32, ABR_CASTING_SAFE, ABR_ERR_CASTING},
      {i64, f64, ABR_CASTING_SAFE, ABR_ERR_CASTING},
      {f32, c128, ABR_CASTING_SAFE, ABR_OK},
      {b8, u8, ABR_CASTING_SAFE, ABR_OK},
      {f64, f32, ABR_CASTING_SAFE, ABR_ERR_CASTING},
      // no: the same dtype only; unsafe: any cast there is.
      {f32, f64, ABR_CASTING_NO, ABR_ERR_CASTING},
      {f64, f64, ABR_CASTING_NO, ABR_OK},
      {c128, f64, ABR_CASTING_UNSAFE, ABR_OK},
      {f64, b8, ABR_CASTING_UNSAFE, ABR_OK},
      {f64, i32, ABR_CASTING_SAME_KIND, ABR_ERR_CASTING},
  };
  for (const Row& row : rows) {
    char from[32], to[32];
    abr_dtype_format(row.from, from, sizeof from);
    abr_dtype_format(row.to, to, sizeof to);
    CAPTURE(row.casting);
    INFO(from << " -> " << to);
    CHECK(copy_one(row.from, 0, row.to, row.casting) == row.expected);
  }
  // What an allowed cast writes is the cast's value: 2.5 into int32 only with "unsafe".
  uint64_t written = 0;
  REQUIRE(copy_one(f64, two_and_a_half, i32, ABR_CASTING_UNSAFE, &written) == ABR_OK);
  CHECK(static_cast<int32_t>(written) == 2);
  CHECK(copy_one(f64, two_and_a_half, i32, ABR_CASTING_DEFAULT) == ABR_ERR_CASTING);
  CHECK(error_mentions("(fractions are cut, and values out of range saturate)"));
  CHECK(copy_one(i64, 300, u8, ABR_CASTING_DEFAULT) == ABR_ERR_CASTING);
  CHECK(error_mentions("refuses int64 -> uint8 (negative values and those out of range wrap)"));
  CHECK(copy_one(i8, 1, u32, ABR_CASTING_DEFAULT) == ABR_ERR_CASTING);
  CHECK(error_mentions("refuses int8 -> uint32 (negative values wrap)"));
  // abr_to_device's dtype is asked for, so its default is NumPy's astype ("unsafe").
  double complex_value[2] = {1.5, 2.0};
  Managed z(complex_value, c128, {1});
  abr_transfer_options real = ABR_TRANSFER_OPTIONS_INIT;
  real.dtype = f64;
  DLManagedTensorVersioned* out = nullptr;
  real.casting = ABR_CASTING_SAME_KIND;
  CHECK(abr_to_device(rt, &z.managed, cpu, &real, nullptr, &out) == ABR_ERR_CASTING);
  CHECK(z.deleted == 0);
  real.casting = ABR_CASTING_DEFAULT;
  REQUIRE(abr_to_device(rt, &z.managed, cpu, &real, nullptr, &out) == ABR_OK);
  Owned result(out);
  CHECK(static_cast<const double*>(result->data)[0] == 1.5);
}

TEST_CASE("vectorized strided kernels never read past the view's last element") {
  // Each view ends exactly at the end of its heap allocation, so the ASan build
  // reports any read beyond it.
  Runtime rt;
  for (int64_t n = 1; n <= 40; ++n) {
    for (int64_t step : {2, -1}) {
      CAPTURE(n);
      CAPTURE(step);
      const std::size_t span = static_cast<std::size_t>(step == 2 ? 2 * n - 1 : n);
      std::vector<float> f(span);
      std::vector<double> g(span);
      for (std::size_t i = 0; i < span; ++i) f[i] = static_cast<float>(i), g[i] = static_cast<double>(i);
      int64_t shape[1] = {n}, strides[1] = {step};
      const uint64_t first = step < 0 ? static_cast<uint64_t>(n - 1) : 0;
      std::vector<float> fo(static_cast<std::size_t>(n));
      std::vector<double> go(static_cast<std::size_t>(n));
      DLTensor fs{f.data(), cpu, 1, f32, shape, strides, first * 4}, fd{fo.data(), cpu, 1, f32, shape, nullptr, 0};
      DLTensor gs{g.data(), cpu, 1, f64, shape, strides, first * 8}, gd{go.data(), cpu, 1, f64, shape, nullptr, 0};
      REQUIRE(abr_copy(rt, &fs, &fd, nullptr, nullptr) == ABR_OK);
      REQUIRE(abr_copy(rt, &gs, &gd, nullptr, nullptr) == ABR_OK);
      for (int64_t i = 0; i < n; ++i) {
        const double expected = static_cast<double>(step > 0 ? step * i : n - 1 - i);
        CHECK(fo[static_cast<std::size_t>(i)] == static_cast<float>(expected));
        CHECK(go[static_cast<std::size_t>(i)] == expected);
      }
    }
  }
}
