// Every malformed descriptor gets its own status and a
// message naming the problem, and the caller keeps the tensor.
#include <climits>
#include <functional>

#include "tests/support/helpers.hpp"

using namespace test;

namespace {

struct Case {
  const char* name;
  std::function<void(Managed&)> corrupt;
  abr_status expected;
  const char* message;
};

}  // namespace

TEST_CASE("malformed descriptors are refused with a distinct status and the source kept") {
  Runtime rt;
  float data[12] = {};
  const Case cases[] = {
      {"major version", [](Managed& m) { m.managed.version.major = 2; }, ABR_ERR_DLPACK_VERSION, "major version 2"},
      {"unknown flag", [](Managed& m) { m.managed.flags = 1u << 7; }, ABR_ERR_DLPACK_FLAGS, "unknown flag bits 0x80"},
      {"negative ndim", [](Managed& m) { m.tensor().ndim = -1; }, ABR_ERR_DLPACK_NDIM, "ndim = -1 is negative"},
      {"huge ndim", [](Managed& m) { m.tensor().ndim = 1 << 20; }, ABR_ERR_DLPACK_NDIM, "exceeds the limit"},
      {"NULL shape", [](Managed& m) { m.tensor().shape = nullptr; }, ABR_ERR_DLPACK_SHAPE, "shape is NULL"},
      {"negative extent", [](Managed& m) { m.shape[1] = -4; }, ABR_ERR_DLPACK_SHAPE, "shape[1] = -4 is negative"},
      {"element overflow",
       [](Managed& m) {
         m.shape = {INT64_MAX / 2, 3};
         m.tensor().shape = m.shape.data();
       },
       ABR_ERR_DLPACK_OVERFLOW, "element count"},
      {"byte overflow",
       [](Managed& m) {
         m.shape = {INT64_MAX / 4 + 1, 1};
         m.tensor().shape = m.shape.data();
       },
       ABR_ERR_DLPACK_OVERFLOW, "byte size"},
      {"stride overflow",
       [](Managed& m) {
         m.strides = {INT64_MAX / 2, 1};
         m.tensor().strides = m.strides.data();
       },
       ABR_ERR_DLPACK_OVERFLOW, "the producer's strides are invalid"},
      // CuPy 13.4 to 14.2: x[::-1] of float32 exports (2^64 - 4) / 4 instead of -1 (cupy/cupy#10172).
      {"CuPy's unsigned strides",
       [](Managed& m) {
         m.strides = {static_cast<int64_t>((~uint64_t{0} - 3) / 4), 1};
         m.tensor().strides = m.strides.data();
       },
       ABR_ERR_DLPACK_OVERFLOW, "as signed byte strides, wrapping as an unsigned division would, they read [-4, 4]"},
      {"byte_offset near 2^64", [](Managed& m) { m.tensor().byte_offset = UINT64_MAX - 8; }, ABR_ERR_DLPACK_OVERFLOW,
       "outside the address space"},
      // The view reaches exactly INT64_MIN bytes below its first element (found by the fuzzer: UBSan
      // "negation of -9223372036854775808" in the address-space check).
      {"view down to INT64_MIN",
       [](Managed& m) {
         m.strides = {INT64_MIN / 8, 1};
         m.tensor().strides = m.strides.data();
       },
       ABR_ERR_DLPACK_OVERFLOW, "outside the address space"},
      {"NULL data", [](Managed& m) { m.tensor().data = nullptr; }, ABR_ERR_DLPACK_DATA, "data is NULL"},
      {"unknown device type", [](Managed& m) { m.tensor().device.device_type = static_cast<DLDeviceType>(5); },
       ABR_ERR_DLPACK_DEVICE, "unknown device type 5"},
      {"negative device id", [](Managed& m) { m.tensor().device.device_id = -2; }, ABR_ERR_DLPACK_DEVICE,
       "negative device id"},
      {"cpu device id", [](Managed& m) { m.tensor().device.device_id = 3; }, ABR_ERR_DLPACK_DEVICE, "has only id 0"},
      {"unknown dtype code",
       [](Managed& m) {
         m.tensor().dtype = {42, 32, 1};
       },
       ABR_ERR_DLPACK_DTYPE, "unknown dtype code 42"},
      {"lanes 0", [](Managed& m) { m.tensor().dtype.lanes = 0; }, ABR_ERR_DLPACK_DTYPE, "lanes = 0"},
      {"lanes 4", [](Managed& m) { m.tensor().dtype.lanes = 4; }, ABR_ERR_DLPACK_DTYPE, "lanes = 4"},
      {"bits 0", [](Managed& m) { m.tensor().dtype.bits = 0; }, ABR_ERR_DLPACK_DTYPE, "cannot have bits = 0"},
      {"float bits 24", [](Managed& m) { m.tensor().dtype.bits = 24; }, ABR_ERR_DLPACK_DTYPE,
       "float cannot have bits = 24"},
      {"bool bits 32",
       [](Managed& m) {
         m.tensor().dtype = {kDLBool, 32, 1};
       },
       ABR_ERR_DLPACK_DTYPE, "bool cannot have bits = 32"},
      {"float4 bits 8",
       [](Managed& m) {
         m.tensor().dtype = {kDLFloat4_e2m1fn, 8, 1};
       },
       ABR_ERR_DLPACK_DTYPE, "float4_e2m1fn cannot have bits = 8"},
      {"sub-byte",
       [](Managed& m) {
         m.tensor().dtype = {kDLFloat4_e2m1fn, 4, 1};
       },
       ABR_ERR_UNSUPPORTED, "sub-byte dtype"},
      {"opaque handle",
       [](Managed& m) {
         m.tensor().dtype = {kDLOpaqueHandle, 64, 1};
       },
       ABR_ERR_UNSUPPORTED, "opaque-handle"},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    Managed m(data, f32, {3, 4});
    c.corrupt(m);
    DLManagedTensorVersioned* out = reinterpret_cast<DLManagedTensorVersioned*>(0x1);
    CHECK(abr_to_device(rt, &m.managed, cpu, nullptr, nullptr, &out) == c.expected);
    CHECK(abr_last_error_status() == c.expected);
    CHECK_MESSAGE(error_mentions(c.message), std::string(abr_last_error()));
    CHECK(error_mentions("abr_to_device: source"));
    CHECK(out == nullptr);
    CHECK(m.deleted == 0);  // on error the caller keeps the source
  }
}

TEST_CASE("NULL arguments and bad handles are refused, never dereferenced") {
  Runtime rt;
  float data[4] = {};
  Managed m(data, f32, {4});
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, nullptr, cpu, nullptr, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("src is NULL"));
  CHECK(abr_to_device(rt, &m.managed, cpu, nullptr, nullptr, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("out is NULL"));
  CHECK(abr_to_device(nullptr, &m.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("runtime is NULL"));
  uint32_t garbage[64] = {0x12345678};
  CHECK(abr_to_device(reinterpret_cast<abr_runtime*>(garbage), &m.managed, cpu, nullptr, nullptr, &out) ==
        ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("invalid or destroyed"));
  CHECK(abr_copy(rt, nullptr, &m.tensor(), nullptr, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(abr_device_count(rt, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(abr_runtime_create(nullptr, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(m.deleted == 0);
  abr_runtime_destroy(nullptr);
  abr_stream_destroy(nullptr);
}

TEST_CASE("options from a newer library or with unknown values are refused") {
  Runtime rt;
  float data[4] = {};
  Managed m(data, f32, {4});
  DLManagedTensorVersioned* out = nullptr;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  REQUIRE(abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION) == ABR_OK);
  options.version = 99;
  CHECK(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("version 99 is newer"));
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = static_cast<abr_copy_mode>(7);
  CHECK(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("copy = 7"));
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.flags = 1u << 30;
  CHECK(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.dtype = {kDLFloat, 12, 1};
  CHECK(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_ERR_DLPACK_DTYPE);
  CHECK(error_mentions("target dtype"));
  abr_runtime_options ropts = ABR_RUNTIME_OPTIONS_INIT;
  abr_runtime_options_init(&ropts, ABR_RUNTIME_OPTIONS_VERSION);
  ropts.flags = 1u << 9;
  abr_runtime* bad = nullptr;
  CHECK(abr_runtime_create(&ropts, &bad) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(bad == nullptr);
  CHECK(m.deleted == 0);
}

TEST_CASE("a struct whose version is 0 is refused by name, before anything moves") {
  Runtime rt;
  float data[4] = {1, 2, 3, 4};
  Managed m(data, f32, {4});
  abr_transfer_options options{};  // never initialised: version 0
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_transfer_options.version is 0: set it with abr_transfer_options_init"));
  CHECK(m.deleted == 0);
  abr_transfer_report report{};
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.report = &report;
  CHECK(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_transfer_report.version is 0"));
  CHECK(m.deleted == 0);
  CHECK(report.path == ABR_PATH_NONE);
  abr_runtime_options ropts{};
  abr_runtime* made = nullptr;
  CHECK(abr_runtime_create(&ropts, &made) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_runtime_options.version is 0"));
  CHECK(made == nullptr);
  abr_pool_stats stats{};
  CHECK(abr_pool_get_stats(rt, &stats) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_pool_stats.version is 0"));
  struct abr_device_info info {};
  CHECK(abr_device_info(rt, 0, &info) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_device_info.version is 0"));
  struct abr_backend_info backend {};
  CHECK(abr_backend_info(rt, ABR_BACKEND_HOST, &backend) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_backend_info.version is 0"));
  CHECK(abr_last_error_backend_code() == 0);  // not a backend's error
  // NULL options still mean the defaults.
  REQUIRE(abr_to_device(rt, &m.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  CHECK(out->dl_tensor.data == data);
  out->deleter(out);
  CHECK(m.deleted == 1);
}

TEST_CASE("destinations that are absent or unknown are refused by name") {
  Runtime rt;
  float data[4] = {};
  Managed m(data, f32, {4});
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, &m.managed, DLDevice{kDLVulkan, 0}, nullptr, nullptr, &out) == ABR_ERR_NO_DEVICE);
  CHECK(error_mentions("not supported by libarraybridge"));
  CHECK(abr_to_device(rt, &m.managed, DLDevice{kDLCPU, 4}, nullptr, nullptr, &out) == ABR_ERR_NO_DEVICE);
  CHECK(error_mentions("cpu:4"));
  CHECK(m.deleted == 0);
}

// Found by tests/fuzz (regressions/empty-tensor-byte-offset-wraps): an empty tensor
// may carry any byte_offset, and forming data + byte_offset as a pointer was
// undefined behaviour (UBSan: pointer overflow) on the view and copy paths.
TEST_CASE("an empty tensor with a byte_offset that wraps the address space is viewed and copied") {
  Runtime rt;
  float data[4] = {};
  for (abr_copy_mode mode : {ABR_COPY_IF_NEEDED, ABR_COPY_ALWAYS}) {
    Managed m(data, {kDLFloat, 32, 1}, {0, 3}, {}, UINT64_MAX - 7);
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.copy = mode;
    DLManagedTensorVersioned* out = nullptr;
    REQUIRE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK);
    CHECK(out->dl_tensor.shape[0] == 0);
    out->deleter(out);
    CHECK(m.deleted == 1);
  }
}

// Also found by tests/fuzz: an empty tensor's other extents and strides may be huge;
// deriving compact strides, the compactness check and the copy engine's byte
// strides all overflowed int64 (UBSan) before they learned to stop at "empty". The
// exact inputs are replayed from tests/fuzz/regressions/ on every fuzz run; this
// checks the behaviour through the C API.
TEST_CASE("empty tensors with huge extents or strides are viewed, copied and copied into") {
  Runtime rt;
  float data[4] = {};
  const int64_t huge = int64_t(1) << 62;
  for (bool with_strides : {false, true}) {
    std::vector<int64_t> strides;
    if (with_strides) strides = {huge, huge, 3};
    Managed m(data, {kDLFloat, 32, 1}, {huge, 0, 4}, strides);
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.copy = ABR_COPY_ALWAYS;
    DLManagedTensorVersioned* out = nullptr;
    REQUIRE_MESSAGE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK,
                    std::string(abr_last_error()));
    CHECK(out->dl_tensor.shape[0] == huge);
    CHECK(abr_copy(rt, &m.managed.dl_tensor, &out->dl_tensor, nullptr, nullptr) == ABR_OK);
    out->deleter(out);
    CHECK(m.deleted == 1);
  }
}

TEST_CASE("packed sub-byte lanes and complex32 move as whole bytes, strided and to OpenCL; casts refuse them") {
  Runtime rt;
  // torch's float4_e2m1fn_x2 (two 4-bit floats a byte) and complex32 (two float16 an element).
  const DLDataType packed_types[] = {{kDLFloat4_e2m1fn, 4, 2}, {kDLComplex, 32, 1}};
  for (DLDataType dtype : packed_types) {
    const std::size_t item = dtype.bits * dtype.lanes / 8;
    CAPTURE(item);
    std::vector<uint8_t> bytes(6 * item);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 1);
    Managed m(bytes.data(), dtype, {3}, {-2}, 4 * item);  // elements 4, 2, 0, read backwards
    for (DLDevice device : {DLDevice{kDLCPU, 0}, DLDevice{kDLOpenCL, 0}}) {
      abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
      options.copy = ABR_COPY_ALWAYS;
      DLManagedTensorVersioned* there = nullptr;
      REQUIRE_MESSAGE(abr_to_device(rt, &m.managed, device, &options, nullptr, &there) == ABR_OK,
                      std::string(abr_last_error()));
      DLManagedTensorVersioned* back = nullptr;
      REQUIRE(abr_to_device(rt, there, {kDLCPU, 0}, &options, nullptr, &back) == ABR_OK);
      const uint8_t* got = static_cast<const uint8_t*>(back->dl_tensor.data);
      for (std::size_t e = 0; e < 3; ++e)
        for (std::size_t b = 0; b < item; ++b) CHECK(got[e * item + b] == bytes[(4 - 2 * e) * item + b]);
      CHECK(back->dl_tensor.dtype.lanes == dtype.lanes);
      back->deleter(back);  // `there` was the runtime's to delete once the copy back was done
    }
    abr_transfer_options cast = ABR_TRANSFER_OPTIONS_INIT;
    cast.dtype = {kDLFloat, 32, 1};
    DLManagedTensorVersioned* out = nullptr;
    CHECK(abr_to_device(rt, &m.managed, {kDLCPU, 0}, &cast, nullptr, &out) == ABR_ERR_UNSUPPORTED);
    CHECK(error_mentions("no conversion from"));
  }
  float data[16] = {};
  // 12 bits an element, and 3 whole bytes: neither is one byte of lanes (the host
  // engine's strided rows move elements of 1, 2, 4, 8 or 16 bytes).
  for (DLDataType odd_type : {DLDataType{kDLFloat4_e2m1fn, 4, 3}, DLDataType{kDLFloat4_e2m1fn, 4, 6}}) {
    Managed odd(data, odd_type, {2});
    DLManagedTensorVersioned* out = nullptr;
    CHECK(abr_to_device(rt, &odd.managed, {kDLCPU, 0}, nullptr, nullptr, &out) == ABR_ERR_DLPACK_DTYPE);
    CHECK(error_mentions("sub-byte lanes packed into one byte"));
  }
}

// A broadcast view (stride 0) is small in its own dtype, but not always in the one it is cast to: 2^62 uint8
// elements as float32 are 2^64 bytes, which wrapped to 0, and the cast wrote past the buffer (SIGSEGV).
TEST_CASE("a cast whose new tensor's byte size overflows 64 bits is refused, never allocated short") {
  Runtime rt;
  uint8_t byte = 7;
  const DLDataType f16 = dt(kDLFloat, 16);
  // 2^64 and 2^64 bytes wrap to 0; 2^63 passes INT64_MAX, within which every size stays
  for (const auto& [elements, to] :
       {std::pair{int64_t{1} << 62, f32}, std::pair{int64_t{1} << 61, f64}, std::pair{int64_t{1} << 62, f16}}) {
    CAPTURE(elements);
    CAPTURE(to.bits);
    Managed m(&byte, u8, {elements});
    m.strides = {0};
    m.tensor().strides = m.strides.data();
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    options.dtype = to;
    DLManagedTensorVersioned* out = nullptr;
    CHECK(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_ERR_DLPACK_OVERFLOW);
    CHECK_MESSAGE(error_mentions("result of shape ["), std::string(abr_last_error()));
    CHECK_MESSAGE(error_mentions("overflows 64 bits"), std::string(abr_last_error()));
    CHECK(out == nullptr);
    CHECK(m.deleted == 0);
  }
}
