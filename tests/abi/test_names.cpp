// abr_device_parse/format and abr_dtype_parse/format: the names every binding
// takes from the library instead of keeping its own copy.
#include <doctest/doctest.h>

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

TEST_CASE("names: dtypes format and parse back, lanes included") {
  const DLDataType cases[] = {{kDLFloat, 32, 1}, {kDLInt, 8, 1},     {kDLUInt, 64, 1},         {kDLBool, 8, 1},
                              {kDLBfloat, 16, 1}, {kDLComplex, 128, 1}, {kDLFloat8_e4m3fn, 8, 1}, {kDLFloat, 32, 4}};
  const char* names[] = {"float32", "int8", "uint64", "bool", "bfloat16", "complex128", "float8_e4m3fn", "float32x4"};
  for (int i = 0; i < 8; ++i) {
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
