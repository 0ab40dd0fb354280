// The OpenCL backend as the rest of the library sees it.
#include <iterator>

#include "lib/tensor/backend_descriptor.hpp"
#include "lib/tensor/device_kinds.hpp"

namespace abr {

std::unique_ptr<DeviceBackend> make_opencl_backend(const abr_runtime_options& options,
                                                   std::shared_ptr<PinnedPool> pool);

namespace {

//                                     type       name      backend             numbered host   address locked new
constexpr DeviceKind kOpenclKinds[] = {
    {kDLOpenCL, "opencl", ABR_BACKEND_OPENCL, true, false, false, false, true, /*queued=*/true}};

}  // namespace

extern const BackendDescriptor kOpenclBackend;
const BackendDescriptor kOpenclBackend{ABR_BACKEND_OPENCL,
                                       "OpenCL",
                                       "opencl",
                                       kOpenclKinds,
                                       std::size(kOpenclKinds),
                                       ABR_RUNTIME_DISABLE_OPENCL,
                                       "ABR_RUNTIME_DISABLE_OPENCL",
                                       "ARRAYBRIDGE_DISABLE_OPENCL",
                                       make_opencl_backend,
                                       nullptr,
                                       /*ipc=*/false};

}  // namespace abr
