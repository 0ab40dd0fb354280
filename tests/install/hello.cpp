// The C++ side of the install test: the header from C++17, RAII over the C handles,
// and an error read back with its text.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <arraybridge/arraybridge.h>

int main() {
  abr_runtime* raw = nullptr;
  if (abr_runtime_create(nullptr, &raw) != ABR_OK) return 1;
  std::unique_ptr<abr_runtime, void (*)(abr_runtime*)> rt(raw, abr_runtime_destroy);
  int32_t count = 0;
  if (abr_device_count(rt.get(), &count) != ABR_OK || count < 1) return 2;
  struct abr_device_info info = ABR_DEVICE_INFO_INIT;  // "struct": the function carries the same name
  if (abr_device_info(rt.get(), 0, &info) != ABR_OK || info.device.device_type != kDLCPU) return 3;
  DLManagedTensorVersioned bad{};
  bad.version.major = DLPACK_MAJOR_VERSION;
  bad.dl_tensor.device = info.device;
  bad.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
  bad.dl_tensor.ndim = -1;
  DLManagedTensorVersioned* out = nullptr;
  if (abr_to_device(rt.get(), &bad, info.device, nullptr, nullptr, &out) != ABR_ERR_DLPACK_NDIM) return 4;
  if (std::string(abr_last_error()).find("ndim") == std::string::npos) return 5;
  std::printf("hello-cpp: %d device(s), libarraybridge %s\n", count, abr_version_string());
  return 0;
}
