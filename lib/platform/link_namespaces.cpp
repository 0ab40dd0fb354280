#include "lib/platform/link_namespaces.hpp"

#include <dlfcn.h>

#include <mutex>

namespace abr {
namespace {

std::mutex& noted_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::string& noted() {
  static std::string what;
  return what;
}

}  // namespace

bool cuda_driver_loaded() {
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);  // matches a loaded library's soname too
  if (!cuda) return false;
  dlclose(cuda);  // RTLD_NOLOAD took a reference
  return true;
}

void note_private_namespace(const std::string& what) {
  std::lock_guard<std::mutex> lock(noted_mutex());
  if (noted().empty()) noted() = what;
}

std::string private_namespace() {
  std::lock_guard<std::mutex> lock(noted_mutex());
  return noted();
}

}  // namespace abr
