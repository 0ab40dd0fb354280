// abr_device_parse/format and abr_dtype_parse/format: the names every binding
// takes from the library instead of keeping its own copy.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "arraybridge/arraybridge.h"

namespace {

std::string device_name(DLDevice device) {
  char out[ABR_NAME_MAX];
  REQUIRE(abr_device_format(device, out, sizeof out) == ABR_OK);
  return out;
}

std::string dtype_name(DLDataType dtype) {
  char out[ABR_NAME_MAX];
  REQUIRE(abr_dtype_format(dtype, out, sizeof out) == ABR_OK);
  return out;
}

}  // namespace

TEST_CASE("names: devices format and parse back") {
  CHECK(device_name({kDLCPU, 0}) == "cpu");
  CHECK(device_name({kDLCUDA, 2}) == "cuda:2");
  CHECK(device_name({kDLCUDAHost, 0}) == "cuda_host");
  CHECK(device_name({kDLOpenCL, 1}) == "opencl:1");
  CHECK(device_name({kDLROCM, 3}) == "dlpack_device_10:3");
  for (const char* text : {"cpu", "cuda:2", "cuda_host", "cuda_managed", "opencl:1"}) {
    DLDevice device{};
    REQUIRE(abr_device_parse(text, &device) == ABR_OK);
    CHECK(device_name(device) == text);
  }
  DLDevice device{};
  REQUIRE(abr_device_parse(" OpenCL ", &device) == ABR_OK);
  CHECK((device.device_type == kDLOpenCL && device.device_id == 0));
}

TEST_CASE("names: bad device text, NULL pointers and short buffers are refused by name") {
  DLDevice device{kDLCPU, 5};
  CHECK(abr_device_parse("tpu:0", &device) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("unknown device 'tpu:0'") != std::string::npos);
  CHECK(device.device_id == 5);  // untouched
  CHECK(abr_device_parse("cuda:x", &device) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("bad device index in 'cuda:x'") != std::string::npos);
  CHECK(abr_device_parse(nullptr, &device) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(abr_device_parse("cpu", nullptr) == ABR_ERR_INVALID_ARGUMENT);
  char small[6] = "xxxxx";
  CHECK(abr_device_format({kDLOpenCL, 0}, small, sizeof small) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("'opencl:0' needs 9 bytes, out has 6") != std::string::npos);
  CHECK(std::strcmp(small, "xxxxx") == 0);  // nothing written
  CHECK(abr_device_format({kDLCPU, 0}, small, sizeof small) == ABR_OK);
  CHECK(std::string(small) == "cpu");
  CHECK(abr_device_format({kDLCPU, 0}, nullptr, 8) == ABR_ERR_INVALID_ARGUMENT);
}

TEST_CASE("names: every device abr_device_format names parses back to the same DLDevice; the rest both refuse") {
  const int32_t ids[] = {0, 1, 3, 255, INT32_MAX, -1, -3, INT32_MIN};
  const int32_t types[] = {kDLCPU,         kDLCUDA, kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLROCM,
                           kDLCUDAManaged, 31,      32,          1000,      INT32_MAX, -1};
  int named = 0, refused = 0;
  for (int32_t type : types)
    for (int32_t id : ids) {
      const DLDevice device{static_cast<DLDeviceType>(type), id};
      CAPTURE(type);
      CAPTURE(id);
      char text[ABR_NAME_MAX] = "untouched";
      if (abr_device_format(device, text, sizeof text) != ABR_OK) {
        ++refused;
        CHECK(std::string(text) == "untouched");  // nothing written
        continue;
      }
      ++named;
      CAPTURE(text);
      DLDevice back{kDLCPU, 12345};
      REQUIRE(abr_device_parse(text, &back) == ABR_OK);
      CHECK((back.device_type == device.device_type && back.device_id == device.device_id));
    }
  CHECK(named > 20);
  CHECK(refused > 20);

  // A negative id is refused both ways, naming it.
  char text[ABR_NAME_MAX] = "untouched";
  CHECK(abr_device_format({kDLOpenCL, -3}, text, sizeof text) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()) == "abr_device_format: device id -3 is negative; device ids are 0 to 2147483647");
  CHECK(abr_device_format({kDLCUDA, INT32_MIN}, text, sizeof text) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("device id -2147483648 is negative") != std::string::npos);
  CHECK(std::string(text) == "untouched");
  DLDevice device{kDLCPU, 7};
  CHECK(abr_device_parse("opencl:-3", &device) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("bad device index in 'opencl:-3'") != std::string::npos);
  CHECK(device.device_id == 7);

  // One memory kind has only id 0, both ways.
  CHECK(abr_device_format({kDLCUDAHost, 5}, text, sizeof text) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()) ==
        "abr_device_format: cuda_host is one memory kind, its only index is 0; got device id 5");
  CHECK(abr_device_format({kDLCPU, 1}, text, sizeof text) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(abr_device_parse("cpu:1", &device) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("its only index is 0") != std::string::npos);

  // A negative device type has no name either.
  CHECK(abr_device_format({static_cast<DLDeviceType>(-1), 0}, text, sizeof text) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()) == "abr_device_format: device type -1 is negative");

  // The fallback name of a type without a row reads back.
  REQUIRE(abr_device_parse(" DLPack_Device_10:3 ", &device) == ABR_OK);
  CHECK((device.device_type == kDLROCM && device.device_id == 3));
  REQUIRE(abr_device_parse("dlpack_device_4", &device) == ABR_OK);  // like "cuda", no index means 0
  CHECK((device.device_type == kDLOpenCL && device.device_id == 0));
  CHECK(abr_device_parse("dlpack_device_3:2", &device) == ABR_ERR_INVALID_ARGUMENT);  // cuda_host by number
  CHECK(std::string(abr_last_error()).find("cuda_host is one memory kind, its only index is 0") != std::string::npos);
  CHECK(abr_device_parse("dlpack_device_-1:0", &device) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("unknown device 'dlpack_device_-1:0'") != std::string::npos);
  CHECK(abr_device_parse("dlpack_device_2147483648:0", &device) == ABR_ERR_INVALID_ARGUMENT);
}

TEST_CASE("names: dtypes format and parse back, lanes included") {
  const DLDataType cases[] = {
      {kDLFloat, 32, 1},    {kDLInt, 8, 1},           {kDLUInt, 64, 1},  {kDLBool, 8, 1},          {kDLBfloat, 16, 1},
      {kDLComplex, 128, 1}, {kDLFloat8_e4m3fn, 8, 1}, {kDLFloat, 32, 4}, {kDLFloat4_e2m1fn, 4, 2}, {kDLComplex, 32, 1}};
  const char* names[] = {"float32",       "int8",      "uint64",          "bool",     "bfloat16", "complex128",
                         "float8_e4m3fn", "float32x4", "float4_e2m1fnx2", "complex32"};
  for (int i = 0; i < 10; ++i) {
    CAPTURE(names[i]);
    CHECK(dtype_name(cases[i]) == names[i]);
    DLDataType back{};
    REQUIRE(abr_dtype_parse(names[i], &back) == ABR_OK);
    CHECK((back.code == cases[i].code && back.bits == cases[i].bits && back.lanes == cases[i].lanes));
  }
  CHECK(dtype_name({42, 7, 1}) == "dlpack_dtype_42_7");
  DLDataType dtype{};
  REQUIRE(abr_dtype_parse("  Complex64 ", &dtype) == ABR_OK);
  CHECK((dtype.code == kDLComplex && dtype.bits == 64 && dtype.lanes == 1));
  for (const char* bad : {"", "float", "real32", "float32x", "float32x0", "int8x99999", "complexx2", "int300"}) {
    CAPTURE(bad);
    CHECK(abr_dtype_parse(bad, &dtype) == ABR_ERR_INVALID_ARGUMENT);
    CHECK(std::string(abr_last_error()).find("unknown dtype") != std::string::npos);
  }
}

TEST_CASE("names: the device kinds, the CPU first, then each built-in backend's, usable here or not") {
  int32_t count = 0;
  REQUIRE(abr_device_kind_count(&count) == ABR_OK);
  REQUIRE(count >= 5);  // a plug-in registered by another test adds its own after these
  struct Expected {
    const char* name;
    DLDeviceType type;
    abr_backend backend;
    uint32_t flags;
    const char* backend_name;
    uint32_t disable_flag;
    const char* disable_env;
    uint32_t default_stream;
  };
  const uint32_t numbered = ABR_KIND_NUMBERED, host = ABR_KIND_HOST_MEMORY, fresh = ABR_KIND_NEW_TENSORS,
                 address = ABR_KIND_ADDRESSES, queued = ABR_KIND_QUEUED, streams = ABR_KIND_DLPACK_STREAMS;
  const Expected expected[] = {
      {"cpu", kDLCPU, ABR_BACKEND_HOST, host | fresh | address, "host", 0, "", 0},
      // CUDA's work is ordered by DLPack's stream values, its default the legacy stream (1).
      {"cuda", kDLCUDA, ABR_BACKEND_CUDA, numbered | fresh | address | queued | streams, "cuda",
       ABR_RUNTIME_DISABLE_CUDA, "ARRAYBRIDGE_DISABLE_CUDA", 1},
      {"cuda_host", kDLCUDAHost, ABR_BACKEND_CUDA, host | fresh | address, "cuda", ABR_RUNTIME_DISABLE_CUDA,
       "ARRAYBRIDGE_DISABLE_CUDA", 0},
      {"cuda_managed", kDLCUDAManaged, ABR_BACKEND_CUDA, host | address, "cuda", ABR_RUNTIME_DISABLE_CUDA,
       "ARRAYBRIDGE_DISABLE_CUDA", 0},
      // OpenCL's data is a cl_mem, and its work goes on queues the runtime makes.
      {"opencl", kDLOpenCL, ABR_BACKEND_OPENCL, numbered | fresh | queued, "opencl", ABR_RUNTIME_DISABLE_OPENCL,
       "ARRAYBRIDGE_DISABLE_OPENCL", 0},
  };
  for (int32_t i = 0; i < 5; ++i) {
    const Expected& want = expected[i];
    abr_device_kind kind = ABR_DEVICE_KIND_INIT;
    REQUIRE(abr_device_kind_get(i, &kind) == ABR_OK);
    CAPTURE(want.name);
    CHECK(std::string(kind.name) == want.name);
    CHECK(kind.type == want.type);
    CHECK(kind.backend == want.backend);
    CHECK(kind.flags == want.flags);
    CHECK(std::string(kind.backend_name) == want.backend_name);
    CHECK(kind.disable_flag == want.disable_flag);
    CHECK(std::string(kind.disable_env) == want.disable_env);
    CHECK(kind.default_stream == want.default_stream);
  }
  abr_device_kind kind = ABR_DEVICE_KIND_INIT;
  CHECK(abr_device_kind_get(count, &kind) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()) ==
        "abr_device_kind_get: kind index " + std::to_string(count) + " is out of range (this library knows " +
            std::to_string(count) + " device kinds)");
  CHECK(abr_device_kind_get(-1, &kind) == ABR_ERR_INVALID_ARGUMENT);
  abr_device_kind unset{};
  CHECK(abr_device_kind_get(0, &unset) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(abr_last_error()).find("abr_device_kind.version is 0") != std::string::npos);
  CHECK(abr_device_kind_count(nullptr) == ABR_ERR_INVALID_ARGUMENT);
}

// A hunt found abr_dtype_format writing names abr_dtype_parse refused: "dlpack_dtype_200_8"
// (the header's own form for codes without a name), "float32x0", "int0", "opaque8".
TEST_CASE("names: every dtype abr_dtype_format names parses back to the same DLDataType; the rest it refuses") {
  int named = 0, refused = 0;
  for (int code : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 42, 200, 255})
    for (int bits : {0, 1, 4, 6, 8, 16, 32, 64, 128, 255})
      for (int lanes : {0, 1, 2, 4, 65535}) {
        const DLDataType dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
        CAPTURE(code);
        CAPTURE(bits);
        CAPTURE(lanes);
        char text[ABR_NAME_MAX] = "untouched";
        if (abr_dtype_format(dtype, text, sizeof text) != ABR_OK) {
          ++refused;
          CHECK(std::string(text) == "untouched");
          CHECK(std::string(abr_last_error()).find("would not read back") != std::string::npos);
          continue;
        }
        ++named;
        CAPTURE(text);
        DLDataType back{};
        REQUIRE(abr_dtype_parse(text, &back) == ABR_OK);
        CHECK((back.code == dtype.code && back.bits == dtype.bits && back.lanes == dtype.lanes));
      }
  CHECK(named > 300);
  CHECK(refused > 100);  // every bits 0 and lanes 0, at least
  DLDataType unnamed{};
  REQUIRE(abr_dtype_parse("DLPACK_DTYPE_200_8x4 ", &unnamed) == ABR_OK);
  CHECK((unnamed.code == 200 && unnamed.bits == 8 && unnamed.lanes == 4));
  CHECK(abr_dtype_parse("float 32", &unnamed) == ABR_ERR_INVALID_ARGUMENT);  // blanks inside a name are no name
}
