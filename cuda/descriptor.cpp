// The CUDA backend as the rest of the library sees it. This file needs neither
// cuda.h nor nvcc: a build without the toolkit compiles it alone, with
// ABR_CUDA_LEFT_OUT saying why, so the kinds still parse and every CUDA device
// says it was left out of this build.
#include <iterator>

#include "lib/tensor/backend_descriptor.hpp"
#include "lib/tensor/device_kinds.hpp"

namespace abr {

#ifndef ABR_CUDA_LEFT_OUT
std::unique_ptr<DeviceBackend> make_cuda_backend(const abr_runtime_options& options, std::shared_ptr<PinnedPool> pool);
#endif

namespace {

//                                   type             name            backend           numbered host  address locked
//                                   new   queued dlpack_streams default_stream
constexpr DeviceKind kCudaKinds[] = {
    {kDLCUDA, "cuda", ABR_BACKEND_CUDA, true, false, true, false, true, true, true, 1},
    {kDLCUDAHost, "cuda_host", ABR_BACKEND_CUDA, false, true, true, true, true},
    {kDLCUDAManaged, "cuda_managed", ABR_BACKEND_CUDA, false, true, true, false, false}};

}  // namespace

extern const BackendDescriptor kCudaBackend;
// Kept as written: clang-format formats each #ifdef branch apart and never settles.
// clang-format off
const BackendDescriptor kCudaBackend{
    ABR_BACKEND_CUDA, "CUDA", "cuda", kCudaKinds, std::size(kCudaKinds), ABR_RUNTIME_DISABLE_CUDA,
    "ABR_RUNTIME_DISABLE_CUDA", "ARRAYBRIDGE_DISABLE_CUDA",
#ifdef ABR_CUDA_LEFT_OUT
    nullptr, ABR_CUDA_LEFT_OUT,
#else
    make_cuda_backend, nullptr,
#endif
    /*ipc=*/true};
// clang-format on

}  // namespace abr
