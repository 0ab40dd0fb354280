#include "lib/base/settings.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "lib/base/log.hpp"

namespace abr::settings {
namespace {

// A whole number from 1 to `most`, or 0 (the default) when unset, empty or 0. Anything
// else (a sign, a fraction, words, past `most`) is said on the log once per value and
// left at the default: strtoul read "-1" as ULONG_MAX, 256 threads on two cores.
unsigned long number(const char* name, unsigned long most) {
  const char* text = std::getenv(name);
  if (!text || !*text) return 0;
  unsigned long value = 0;
  const char* c = text;
  for (; *c >= '0' && *c <= '9' && value <= most; ++c) value = value * 10 + static_cast<unsigned long>(*c - '0');
  if (!*c && value <= most) return value;
  // Never destroyed: a transfer may read a setting while the process exits.
  static std::mutex& mutex = *new std::mutex;
  static auto& said = *new std::map<std::string, std::string>;  // name -> the value last said
  bool say = false;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    std::string& last = said[name];
    say = last != text;
    if (say) last = text;
  }
  if (say) log::warn("ignoring {}={} (a whole number from 1 to {}): using the default", name, text, most);
  return 0;
}

}  // namespace

unsigned long staging_threads() { return number("ARRAYBRIDGE_STAGING_THREADS", 256); }
unsigned long staging_chunk_mib() { return number("ARRAYBRIDGE_STAGING_CHUNK_MIB", 1024); }

bool keep_host_buffers() {
  const char* setting = std::getenv("ARRAYBRIDGE_KEEP_HOST_BUFFERS");
  return !(setting && std::strcmp(setting, "0") == 0);
}

const char* log_level() { return std::getenv("ARRAYBRIDGE_LOG_LEVEL"); }
const char* cuda_library() { return std::getenv("ARRAYBRIDGE_CUDA_LIBRARY"); }
const char* opencl_library() { return std::getenv("ARRAYBRIDGE_OPENCL_LIBRARY"); }
const char* opencl_namespace() { return std::getenv("ARRAYBRIDGE_OPENCL_NAMESPACE"); }

}  // namespace abr::settings
