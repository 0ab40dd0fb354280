// The one list of the backends built into the library. Each folder defines its
// descriptor (cuda/descriptor.cpp, opencl/descriptor.cpp); a build without the
// CUDA toolkit still has CUDA's, which says it was left out.
#include "lib/tensor/backend_descriptor.hpp"

namespace abr {

extern const BackendDescriptor kCudaBackend;
extern const BackendDescriptor kOpenclBackend;

const std::vector<const BackendDescriptor*>& builtin_backends() {
  static const std::vector<const BackendDescriptor*> list{&kCudaBackend, &kOpenclBackend};
  return list;
}

}  // namespace abr
