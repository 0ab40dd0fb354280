#include "opencl/discovery.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/base/log.hpp"
#include "lib/base/text.hpp"
#include "opencl/api.hpp"

namespace abr::opencl {
namespace {

// Reads a string property through a clGet*Info-shaped call: query(size, value, size_ret).
template <class Query>
std::string info_text(Query&& query) {
  std::size_t size = 0;
  if (query(0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string text(size, '\0');
  if (query(size, text.data(), nullptr) != CL_SUCCESS) return "";
  return text.substr(0, text.find('\0'));
}

std::string platform_text(const Api& cl, cl_platform_id platform, cl_platform_info what) {
  return info_text([&](std::size_t n, void* v, std::size_t* r) { return cl.GetPlatformInfo(platform, what, n, v, r); });
}

std::string device_text(const Api& cl, cl_device_id device, cl_device_info what) {
  return info_text([&](std::size_t n, void* v, std::size_t* r) { return cl.GetDeviceInfo(device, what, n, v, r); });
}

template <class T>
T device_value(const Api& cl, cl_device_id device, cl_device_info what, T fallback) {
  T value{};
  return cl.GetDeviceInfo(device, what, sizeof value, &value, nullptr) == CL_SUCCESS ? value : fallback;
}

}  // namespace

std::string device_key(const Api& cl, cl_device_id device) {
  cl_platform_id platform = nullptr;
  if (cl.GetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr) != CL_SUCCESS) return "";
  cl_uint count = 0;
  if (cl.GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS) return "";
  std::vector<cl_device_id> ids(count);
  if (cl.GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr) != CL_SUCCESS) return "";
  const std::size_t place = static_cast<std::size_t>(std::find(ids.begin(), ids.end(), device) - ids.begin());
  if (place == ids.size()) return "";
  constexpr cl_device_info kDeviceUuid = 0x106A;  // CL_DEVICE_UUID_KHR (cl_khr_device_uuid): not every driver has it
  unsigned char uuid[16] = {};
  const bool has_uuid = cl.GetDeviceInfo(device, kDeviceUuid, sizeof uuid, uuid, nullptr) == CL_SUCCESS;
  return fmt::format("{}\n{}\n{}\n{}\n{:02x}", platform_text(cl, platform, CL_PLATFORM_NAME),
                     platform_text(cl, platform, CL_PLATFORM_VERSION), place, device_text(cl, device, CL_DEVICE_NAME),
                     fmt::join(has_uuid ? uuid : uuid + 16, uuid + 16, ""));
}

Discovery discover_with(const Api* cl, const std::string& unavailable_reason) {
  Discovery found;
  BackendReport& report = found.report;
  report.info.backend = ABR_BACKEND_OPENCL;
  auto unavailable = [&](const std::string& why) {
    copy_text(report.info.detail, "OpenCL unavailable: " + why);
    log::info("{}", report.info.detail);
    found.devices.clear();
    found.wrap_alignment.clear();
    found.keys.clear();
    report.devices.clear();
    return found;
  };
  if (!cl) return unavailable(unavailable_reason);

  cl_uint platform_count = 0;
  const cl_int status = cl->GetPlatformIDs(0, nullptr, &platform_count);
  if (status == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (status == CL_SUCCESS && platform_count == 0))
    return unavailable(fmt::format("{} found no OpenCL platform (no driver installed)", cl->library));
  if (status != CL_SUCCESS)
    return unavailable(fmt::format("clGetPlatformIDs failed: {} ({})", error_name(status), status));
  std::vector<cl_platform_id> platforms(platform_count);
  cl->GetPlatformIDs(platform_count, platforms.data(), nullptr);

  std::vector<std::string> platform_names;
  for (cl_platform_id platform : platforms) {
    const std::string name = platform_text(*cl, platform, CL_PLATFORM_NAME);
    const std::string version = platform_text(*cl, platform, CL_PLATFORM_VERSION);
    cl_uint count = 0;
    if (cl->GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS || count == 0) continue;
    std::vector<cl_device_id> ids(count);
    cl->GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr);
    platform_names.push_back(name);
    for (cl_device_id id : ids) {
      struct abr_device_info info {};
      info.device = {kDLOpenCL, static_cast<int32_t>(report.devices.size())};
      info.backend = ABR_BACKEND_OPENCL;
      info.memory_bytes = device_value<cl_ulong>(*cl, id, CL_DEVICE_GLOBAL_MEM_SIZE, 0);
      // A CPU device, or one that says it shares the host's memory, can use host pointers in place.
      const bool cpu = device_value<cl_device_type>(*cl, id, CL_DEVICE_TYPE, 0) & CL_DEVICE_TYPE_CPU;
      if (cpu || device_value<cl_bool>(*cl, id, CL_DEVICE_HOST_UNIFIED_MEMORY, CL_FALSE))
        info.flags |= ABR_DEVICE_SHARES_HOST_MEMORY;
      if (!device_value<cl_device_fp_config>(*cl, id, CL_DEVICE_DOUBLE_FP_CONFIG, 0))  // no cl_khr_fp64
        info.flags |= ABR_DEVICE_NO_DOUBLE_PRECISION;
      copy_text(info.name, device_text(*cl, id, CL_DEVICE_NAME));
      copy_text(info.platform, version.empty() ? name : name + " (" + version + ")");
      report.devices.push_back(info);
      found.devices.push_back(id);
      found.keys.push_back(device_key(*cl, id));
      found.wrap_alignment.push_back(
          std::max<uint64_t>(device_value<cl_uint>(*cl, id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, 8) / 8, 1));
    }
  }
  if (report.devices.empty()) return unavailable(fmt::format("{} platform(s) but no devices", platform_count));
  report.info.available = 1;
  report.info.device_count = static_cast<int32_t>(report.devices.size());
  copy_text(report.info.detail,
            fmt::format("{} ({}): {} device(s) on {}", cl->library, cl->where, report.devices.size(),
                        fmt::join(platform_names, ", ")));
  return found;
}

Discovery discover() {
  // Once per process: the devices do not change, and a driver's first-call
  // initialisation is not safe to race (PoCL 3.1 crashed in clGetDeviceInfo
  // when two threads created runtimes at once).
  static std::once_flag once;
  static Discovery found;
  std::call_once(once, [] {
    std::string reason;
    const Api* cl = api(&reason);
    found = discover_with(cl, reason);
  });
  return found;
}

}  // namespace abr::opencl
