#include <arraybridge/arraybridge.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <dlfcn.h>
#include <cuda.h>
static void check(abr_status s, const char* what) {
  if (s != ABR_OK) {
    std::fprintf(stderr, "%s failed %d\n", what, (int)s);
    std::exit(1);
  }
}
int main(int argc, char** argv) {
  const DLDevice DEV = std::getenv("OPENCL") ? DLDevice{kDLOpenCL, 0} : DLDevice{kDLCUDA, 0};
  const char* mode = argv[1];
  int n = std::atoi(argv[2]);
  size_t bytes = argc > 3 ? std::atol(argv[3]) : 4096;
  if (std::getenv("PUSH")) {  // as a framework leaves its thread: the primary context current
    void* h = dlopen(std::getenv("ARRAYBRIDGE_CUDA_LIBRARY"), RTLD_NOW);
    auto init = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    init(0);
    auto retain = (CUresult(*)(CUcontext*, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
    auto push = (CUresult(*)(CUcontext))dlsym(h, "cuCtxPushCurrent_v2");
    CUcontext c = nullptr;
    if (retain(&c, 0) || push(c)) {
      std::fprintf(stderr, "push failed\n");
      return 1;
    }
  }
  abr_runtime* rt = nullptr;
  check(abr_runtime_create(nullptr, &rt), "create");
  int64_t shape[1] = {(int64_t)(bytes / 4)};
  std::vector<float> a(bytes / 4, 1.f), b(bytes / 4);
  DLTensor host{a.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor host_out{b.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  abr_transfer_options copy = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&copy, ABR_TRANSFER_OPTIONS_VERSION);
  copy.copy = ABR_COPY_ALWAYS;
  DLManagedTensorVersioned up{};
  up.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  up.dl_tensor = host;
  DLManagedTensorVersioned *d1 = nullptr, *d2 = nullptr;
  check(abr_to_device(rt, &up, DEV, &copy, nullptr, &d1), "to_device");
  DLManagedTensorVersioned up2 = up;
  check(abr_to_device(rt, &up2, DEV, &copy, nullptr, &d2), "to_device");
  for (int i = 0; i < n; ++i) {
    if (!std::strcmp(mode, "h2d"))
      check(abr_copy(rt, &host, &d1->dl_tensor, nullptr, nullptr), "copy");
    else if (!std::strcmp(mode, "d2h"))
      check(abr_copy(rt, &d1->dl_tensor, &host_out, nullptr, nullptr), "copy");
    else if (!std::strcmp(mode, "d2d"))
      check(abr_copy(rt, &d1->dl_tensor, &d2->dl_tensor, nullptr, nullptr), "copy");
    else if (!std::strcmp(mode, "new")) {
      DLManagedTensorVersioned u = up;
      DLManagedTensorVersioned* o = nullptr;
      check(abr_to_device(rt, &u, DEV, &copy, nullptr, &o), "new");
      o->deleter(o);
    }
  }
  d1->deleter(d1);
  d2->deleter(d2);
  abr_runtime_destroy(rt);
}
