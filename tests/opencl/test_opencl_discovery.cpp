// OpenCL discovery, for real on PoCL (installed by dev/bootstrap.sh, so this
// never skips), and the reports for a missing loader or a disabled backend.
#include <cstring>

#include "lib/base/error.hpp"
#include "opencl/api.hpp"
#include "opencl/discovery.hpp"
#include "tests/support/opencl_helpers.hpp"

using namespace test;

namespace {

// Devices the CUDA backend adds to the list (its GPUs and cuda_host), 0 without CUDA.
int32_t cuda_entries(abr_runtime* rt) {
  struct abr_backend_info cuda = ABR_BACKEND_INFO_INIT;
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_CUDA, &cuda) == ABR_OK);
  return cuda.available ? cuda.device_count + 1 : 0;
}

}  // namespace

// By capability, not position: on a GPU machine NVIDIA's platform comes first.
TEST_CASE("PoCL appears as an OpenCL device sharing host memory; every OpenCL device is listed") {
  Runtime rt;
  struct abr_backend_info backend = ABR_BACKEND_INFO_INIT;
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_OPENCL, &backend) == ABR_OK);
  REQUIRE_MESSAGE(backend.available == 1, backend.detail);
  CHECK(backend.device_count >= 1);
  CHECK(std::string(backend.detail).find("Portable Computing Language") != std::string::npos);

  int32_t count = 0;
  REQUIRE(abr_device_count(rt, &count) == ABR_OK);
  CHECK(count == 1 + backend.device_count + cuda_entries(rt));
  struct abr_device_info info = ABR_DEVICE_INFO_INIT;
  REQUIRE(abr_device_info(rt, 0, &info) == ABR_OK);
  CHECK(info.device.device_type == kDLCPU);  // the CPU comes first

  const std::vector<OclDevice> devices = opencl_devices(rt);
  REQUIRE(static_cast<int32_t>(devices.size()) == backend.device_count);
  int pocl = 0;
  for (std::size_t k = 0; k < devices.size(); ++k) {
    INFO(devices[k].platform << " / " << devices[k].name);
    CHECK(devices[k].device.device_id == static_cast<int32_t>(k));  // numbered in the order listed
    CHECK(devices[k].backend == ABR_BACKEND_OPENCL);
    CHECK(devices[k].name.size() > 0);
    CHECK(devices[k].memory_bytes > 0);
    if (devices[k].platform.find("Portable Computing Language") == 0) {
      ++pocl;
      CHECK(devices[k].shares_host_memory);  // PoCL runs on the CPU
    }
  }
  CHECK(pocl >= 1);
}

TEST_CASE("a missing ICD loader or a disabled backend is a report, not an error") {
  std::string reason;
  CHECK(abr::opencl::load_api("/nonexistent/libOpenCL.so.1", abr::opencl::NamespacePolicy::Auto, &reason) == nullptr);
  CHECK(reason.find("cannot load the OpenCL ICD loader /nonexistent/libOpenCL.so.1") == 0);
  const abr::BackendReport missing = abr::opencl::discover_with(nullptr, reason).report;
  CHECK(missing.info.available == 0);
  CHECK(missing.devices.empty());
  CHECK(std::string(missing.info.detail).find("OpenCL unavailable: cannot load") == 0);

  abr_runtime_options options = ABR_RUNTIME_OPTIONS_INIT;
  abr_runtime_options_init(&options, ABR_RUNTIME_OPTIONS_VERSION);
  options.flags = ABR_RUNTIME_DISABLE_OPENCL;
  abr_runtime* rt = nullptr;
  REQUIRE(abr_runtime_create(&options, &rt) == ABR_OK);
  struct abr_backend_info backend = ABR_BACKEND_INFO_INIT;
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_OPENCL, &backend) == ABR_OK);
  CHECK(backend.available == 0);
  CHECK(std::string(backend.detail) == "OpenCL unavailable: disabled by ABR_RUNTIME_DISABLE_OPENCL");
  int32_t count = 0;
  abr_device_count(rt, &count);
  CHECK(count == 1 + cuda_entries(rt));  // the CPU, and CUDA's devices where there is a GPU
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    REQUIRE(abr_device_info(rt, i, &info) == ABR_OK);
    CHECK(info.device.device_type != kDLOpenCL);
  }
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
