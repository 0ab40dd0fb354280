#include "lib/base/fault.hpp"

#ifdef ABR_FAULT_INJECTION
#include "lib/base/error.hpp"
#include "lib/base/log.hpp"

namespace abr::fault {
namespace {

thread_local uint64_t armed = 0;
thread_local uint64_t count = 0;

bool hit(const char* site) {
  ++count;
  if (armed == 0 || count != armed) return false;
  log::debug("injected fault at point {}: {}", count, site);
  return true;
}

}  // namespace

void point(abr_status status, const char* site) {
  if (hit(site)) fail(status, "injected fault: {}", site);
}

bool fails(const char* site) { return hit(site); }

void arm(uint64_t nth) {
  armed = nth;
  count = 0;
}

uint64_t passed() { return count; }

}  // namespace abr::fault
#endif
