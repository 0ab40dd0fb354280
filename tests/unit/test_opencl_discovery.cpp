// OpenCL discovery, for real on PoCL (installed by tools/bootstrap.sh, so this
// never skips), and the reports for a missing loader or a disabled backend.
#include "../../lib/error.hpp"
#include "../../opencl/api.hpp"
#include "../../opencl/discovery.hpp"
#include "helpers.hpp"

using namespace test;

TEST_CASE("PoCL appears as an OpenCL device after the CPU, sharing host memory") {
  Runtime rt;
  struct abr_backend_info backend;
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_OPENCL, &backend) == ABR_OK);
  REQUIRE_MESSAGE(backend.available == 1, backend.detail);
  CHECK(backend.device_count >= 1);
  CHECK(std::string(backend.detail).find("Portable Computing Language") != std::string::npos);

  int32_t count = 0;
  REQUIRE(abr_device_count(rt, &count) == ABR_OK);
  CHECK(count == 1 + backend.device_count);
  struct abr_device_info info;
  REQUIRE(abr_device_info(rt, 0, &info) == ABR_OK);
  CHECK(info.device.device_type == kDLCPU);  // the CPU comes first
  REQUIRE(abr_device_info(rt, 1, &info) == ABR_OK);
  CHECK(info.device.device_type == kDLOpenCL);
  CHECK(info.device.device_id == 0);
  CHECK(info.backend == ABR_BACKEND_OPENCL);
  CHECK(std::strlen(info.name) > 0);
  CHECK(info.memory_bytes > 0);
  CHECK((info.flags & ABR_DEVICE_SHARES_HOST_MEMORY) != 0);  // PoCL runs on the CPU
  CHECK(std::string(info.platform).find("Portable Computing Language") == 0);
}

TEST_CASE("a missing ICD loader or a disabled backend is a report, not an error") {
  std::string reason;
  CHECK(abr::opencl::load_api("/nonexistent/libOpenCL.so.1", &reason) == nullptr);
  CHECK(reason.find("cannot load the OpenCL ICD loader /nonexistent/libOpenCL.so.1") == 0);
  const abr::BackendReport missing = abr::opencl::discover_with(nullptr, reason).report;
  CHECK(missing.info.available == 0);
  CHECK(missing.devices.empty());
  CHECK(std::string(missing.info.detail).find("OpenCL unavailable: cannot load") == 0);

  abr_runtime_options options;
  abr_runtime_options_init(&options);
  options.flags = ABR_RUNTIME_DISABLE_OPENCL;
  abr_runtime* rt = nullptr;
  REQUIRE(abr_runtime_create(&options, &rt) == ABR_OK);
  struct abr_backend_info backend;
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_OPENCL, &backend) == ABR_OK);
  CHECK(backend.available == 0);
  CHECK(std::string(backend.detail) == "OpenCL unavailable: disabled by ABR_RUNTIME_DISABLE_OPENCL");
  int32_t count = 0;
  abr_device_count(rt, &count);
  CHECK(count == 1);
  abr_runtime_destroy(rt);
}

TEST_CASE("OpenCL error names carry the code") {
  CHECK(std::string(abr::opencl::error_name(CL_INVALID_MEM_OBJECT)) == "CL_INVALID_MEM_OBJECT");
  CHECK(std::string(abr::opencl::error_name(-9999)) == "CL_UNKNOWN_ERROR");
  try {
    abr::opencl::fail_cl(CL_INVALID_MEM_OBJECT, "clEnqueueReadBuffer");
    FAIL("fail_cl returned");
  } catch (const abr::Error& e) {
    CHECK(e.status() == ABR_ERR_BACKEND);
    CHECK(std::string(e.what()) == "clEnqueueReadBuffer failed: CL_INVALID_MEM_OBJECT (-38)");
  }
}
