// Versioned structs across the C ABI (libgit2's discipline). The caller says
// which version of a struct it was compiled with; the library reads and writes
// only the bytes that version has, so an old caller's struct is never overrun by
// a newer library, and a newer caller's is refused by an older one. Fields are
// only ever added at the end, each addition a new version with its size here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "lib/base/error.hpp"

namespace abr::capi {

struct StructVersions {
  const char* name;          // "abr_pool_stats"
  const char* init;          // "abr_pool_stats_init"
  const char* macro;         // "ABR_POOL_STATS_VERSION"
  const std::size_t* sizes;  // sizes[v - 1]: the struct's size in version v
  uint32_t current;          // the newest version this library knows
};

// The caller's size of the struct. Version 0 (an uninitialised struct) and
// versions newer than the library's are ABR_ERR_INVALID_ARGUMENT naming the struct.
inline std::size_t caller_size(uint32_t version, const StructVersions& v) {
  if (version == 0)
    fail(ABR_ERR_INVALID_ARGUMENT, "{}.version is 0: set it with {}(&x, {}) or {}_INIT", v.name, v.init, v.macro,
         std::string_view(v.macro, std::strlen(v.macro) - 8));
  if (version > v.current)
    fail(ABR_ERR_INVALID_ARGUMENT, "{} version {} is newer than this library's ({})", v.name, version, v.current);
  return v.sizes[version - 1];
}

// abr_X_init: zeroes the bytes of `version` and stamps it.
template <class T>
void init_versioned(T* out, unsigned int version, const StructVersions& v) {
  if (!out) fail(ABR_ERR_INVALID_ARGUMENT, "the {} pointer is NULL", v.name);  // after the call's own name
  const std::size_t size = caller_size(version, v);
  std::memset(static_cast<void*>(out), 0, size);
  out->version = version;
}

// A caller's struct as the library's current one: the bytes of the caller's
// version, the fields it lacks zero (their defaults).
template <class T>
T read_versioned(const T* in, const StructVersions& v) {
  T out{};
  std::memcpy(static_cast<void*>(&out), static_cast<const void*>(in), caller_size(in->version, v));
  return out;
}

// The library's struct into the caller's: only the bytes of the caller's version;
// its version field stays as the caller set it.
template <class T>
void write_versioned(T* out, const T& full, const StructVersions& v) {
  const uint32_t version = out->version;
  std::memcpy(static_cast<void*>(out), static_cast<const void*>(&full), caller_size(version, v));
  out->version = version;
}

}  // namespace abr::capi
