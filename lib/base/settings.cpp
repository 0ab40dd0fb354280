#include "lib/base/settings.hpp"

#include <cstdlib>
#include <cstring>

namespace abr::settings {
namespace {

// A positive whole number, or 0 when unset, empty or not a number.
unsigned long number(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return 0;
  char* end = nullptr;
  const unsigned long value = std::strtoul(text, &end, 10);
  return *end ? 0 : value;
}

}  // namespace

unsigned long staging_threads() { return number("ARRAYBRIDGE_STAGING_THREADS"); }
unsigned long staging_chunk_mib() { return number("ARRAYBRIDGE_STAGING_CHUNK_MIB"); }

bool keep_host_buffers() {
  const char* setting = std::getenv("ARRAYBRIDGE_KEEP_HOST_BUFFERS");
  return !(setting && std::strcmp(setting, "0") == 0);
}

const char* log_level() { return std::getenv("ARRAYBRIDGE_LOG_LEVEL"); }
const char* cuda_library() { return std::getenv("ARRAYBRIDGE_CUDA_LIBRARY"); }
const char* opencl_library() { return std::getenv("ARRAYBRIDGE_OPENCL_LIBRARY"); }
const char* opencl_namespace() { return std::getenv("ARRAYBRIDGE_OPENCL_NAMESPACE"); }

}  // namespace abr::settings
