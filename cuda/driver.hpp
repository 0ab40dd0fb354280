// The CUDA driver API, reached through libcuda opened at run time (never linked),
// so libarraybridge loads and works on machines without a GPU or driver. Only
// the driver API is used: no libcudart, and the kernels come as an embedded
// fatbin (kernels.cu), loaded per device with cuModuleLoadData.
#pragma once

#include <cuda.h>

#include <string>
#include <memory>

// X-macro of every entry point. cuda.h maps names to their current ABI version
// (cuMemAlloc -> cuMemAlloc_v2); ABR_CUDA_SYMBOL resolves that versioned name.
// The entry points grouped as the driver's headers group them, kept as written.
// clang-format off
#define ABR_CUDA_ENTRY_POINTS(X) \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceTotalMem) X(cuDeviceGetAttribute) \
  X(cuDeviceCanAccessPeer) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
  X(cuCtxGetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxEnablePeerAccess) X(cuCtxSynchronize) \
  X(cuMemAlloc) X(cuMemFree) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemHostAlloc) X(cuMemFreeHost) \
  X(cuMemHostRegister) X(cuMemHostUnregister) \
  X(cuPointerGetAttributes) \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpyPeerAsync) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuStreamGetCtx) \
  X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize) X(cuEventDestroy) \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) \
  X(cuDeviceGetUuid) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle) \
  X(cuIpcGetEventHandle) X(cuIpcOpenEventHandle)
// clang-format on

namespace abr::cuda {

struct Driver {
#define ABR_CUDA_MEMBER(name) decltype(&::name) name;
  ABR_CUDA_ENTRY_POINTS(ABR_CUDA_MEMBER)
#undef ABR_CUDA_MEMBER
  std::string library;  // what was opened, for messages
  int version = 0;      // cuDriverGetVersion: 12040 = 12.4
};

// The process-wide driver from $ARRAYBRIDGE_CUDA_LIBRARY or libcuda.so.1, opened
// and initialised once and kept for the life of the process (deleters may run
// at exit). nullptr with `reason` when there is none or cuInit fails.
const Driver* driver(std::string* reason);

// Loads the driver at `path` (what driver() does once): nullptr with `reason` when it
// cannot be had, or when `namespace_taken` names a library in a link-map namespace of
// its own, whose libc would overwrite the driver's pthread keys (lib/platform/link_namespaces.hpp).
std::unique_ptr<Driver> load_driver(const char* path, const std::string& namespace_taken, std::string* reason);

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", from the driver when it knows the code.
std::string error_text(const Driver& cu, CUresult code);

// Errors after which the context is unusable until the process exits: every
// later call on the device fails (the CUDA programming guide's "sticky" errors).
bool is_sticky(CUresult code);

}  // namespace abr::cuda
