#include "lib/devices/devices.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/text.hpp"

namespace abr {
namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "host CPU";
}

uint64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

BackendInfo make_backend(abr_backend backend, bool available, const std::string& detail) {
  BackendInfo info{};
  info.backend = backend;
  info.available = available ? 1 : 0;
  copy_text(info.detail, detail);
  return info;
}

}  // namespace

DeviceRegistry::DeviceRegistry(const std::vector<const BackendReport*>& backends) {
  DeviceInfo cpu{};
  cpu.device = {kDLCPU, 0};
  cpu.backend = ABR_BACKEND_HOST;
  cpu.flags = ABR_DEVICE_SHARES_HOST_MEMORY;
  cpu.memory_bytes = host_memory_bytes();
  copy_text(cpu.name, cpu_model_name());
  copy_text(cpu.platform, "host");
  devices_.push_back(cpu);

  BackendInfo host = make_backend(ABR_BACKEND_HOST, true, "host memory");
  host.device_count = 1;
  backends_.push_back(host);
  for (const BackendReport* report : backends) {
    backends_.push_back(report->info);
    devices_.insert(devices_.end(), report->devices.begin(), report->devices.end());
  }
}

const DeviceInfo& DeviceRegistry::at(int32_t index) const {
  if (index < 0 || index >= count())
    fail(ABR_ERR_INVALID_ARGUMENT, "device index {} is out of range (this runtime has {} devices)", index, count());
  return devices_[static_cast<std::size_t>(index)];
}

const BackendInfo& DeviceRegistry::backend(int32_t backend) const {
  for (const BackendInfo& info : backends_)
    if (static_cast<int32_t>(info.backend) == backend) return info;
  fail(ABR_ERR_INVALID_ARGUMENT, "unknown backend {}", backend);
}

void DeviceRegistry::refuse_missing(DLDevice device, const char* what) const {
  const DeviceKind* kind = find_kind(device.device_type);
  if (!kind) {
    std::string served;  // "host, CUDA and OpenCL"
    for (std::size_t i = 0; i < backends_.size(); ++i)
      served += fmt::format("{}{}",
                            i == 0                          ? ""
                                : i + 1 == backends_.size() ? " and "
                                                            : ", ",
                            backend_name(backends_[i].backend));
    fail(ABR_ERR_NO_DEVICE, "{}: {} is not supported by libarraybridge ({} are)", what, device_string(device), served);
  }
  const BackendInfo* found = nullptr;
  for (const BackendInfo& info : backends_)
    if (info.backend == kind->backend) found = &info;
  if (!found)
    fail(ABR_ERR_NO_DEVICE, "{}: no device {}: this runtime has no {} backend", what, device_string(device),
         backend_name(kind->backend));
  const BackendInfo& b = *found;
  if (!b.available) fail(ABR_ERR_NO_DEVICE, "{}: no device {}: {}", what, device_string(device), b.detail);
  fail(ABR_ERR_NO_DEVICE, "{}: no device {} (the {} backend has {} device(s))", what, device_string(device),
       backend_name(kind->backend), b.device_count);
}

}  // namespace abr
