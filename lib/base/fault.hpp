// Fault injection for tests. In the sanitizer test build (ABR_FAULT_INJECTION
// defined) every injection point counts itself on the calling thread, and the
// armed one fails as the real failure would: so a test can walk every
// allocation and backend call of a transfer and check that each failure leaves
// a clean status, no leak and the caller's ownership intact. In every other
// build the points are empty inline functions.
#pragma once

#include <cstdint>

#include "arraybridge/arraybridge.h"

namespace abr::fault {

#ifdef ABR_FAULT_INJECTION
// Throws Error(status, "injected fault: <site>") when this is the armed point.
void point(abr_status status, const char* site);
// For paths that cannot throw: true when this is the armed point.
bool fails(const char* site);
// Arms the nth point (1-based) from now on this thread; 0 disarms. Resets the count.
void arm(uint64_t nth);
// Points passed on this thread since arm().
uint64_t passed();
#else
inline void point(abr_status, const char*) {}
inline bool fails(const char*) { return false; }
#endif

}  // namespace abr::fault
