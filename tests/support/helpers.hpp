// Test helpers: host tensors with counted deleters, a reference strided reader,
// and a runtime fixture.
#pragma once

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "arraybridge/arraybridge.h"

namespace test {

inline DLDataType dt(uint8_t code, uint8_t bits) { return DLDataType{code, bits, 1}; }
inline const DLDataType f32 = dt(kDLFloat, 32), f64 = dt(kDLFloat, 64), i32 = dt(kDLInt, 32), u8 = dt(kDLUInt, 8);

// Polls `done` until it holds or `seconds` pass; whether it held. What another thread
// does is waited for so, never with a sleep that a loaded machine can outlast.
template <typename Done>
bool wait_until(Done done, int seconds = 5) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// A managed tensor over memory the test owns. deleted counts deleter calls.
struct Managed {
  DLManagedTensorVersioned managed{};
  DLManagedTensor legacy{};
  std::vector<int64_t> shape, strides;
  int deleted = 0;

  static void count_versioned(DLManagedTensorVersioned* self) { static_cast<Managed*>(self->manager_ctx)->deleted++; }
  static void count_legacy(DLManagedTensor* self) { static_cast<Managed*>(self->manager_ctx)->deleted++; }

  Managed(void* data, DLDataType dtype, std::vector<int64_t> shape_, std::vector<int64_t> strides_ = {},
          uint64_t byte_offset = 0, DLDevice device = {kDLCPU, 0})
      : shape(std::move(shape_)), strides(std::move(strides_)) {
    DLTensor& t = managed.dl_tensor;
    t.data = data;
    t.device = device;
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.empty() ? nullptr : shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
    managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    managed.manager_ctx = this;
    managed.deleter = count_versioned;
    legacy.dl_tensor = t;
    legacy.manager_ctx = this;
    legacy.deleter = count_legacy;
  }
  Managed(const Managed&) = delete;
  DLTensor& tensor() { return managed.dl_tensor; }
};

// Element at a multi-index of a strided view, as raw bytes (the reference).
inline const char* element_at(const DLTensor& t, const std::vector<int64_t>& index, std::size_t itemsize) {
  const char* p = static_cast<const char*>(t.data) + t.byte_offset;
  std::vector<int64_t> compact(static_cast<std::size_t>(t.ndim), 1);
  for (int i = t.ndim - 2; i >= 0; --i) compact[i] = compact[i + 1] * t.shape[i + 1];
  for (int i = 0; i < t.ndim; ++i) p += index[i] * (t.strides ? t.strides[i] : compact[i]) * int64_t(itemsize);
  return p;
}

// Calls f(index) for every multi-index of `shape` in row-major order.
template <class F>
void for_each_index(const std::vector<int64_t>& shape, F&& f) {
  for (int64_t extent : shape)
    if (extent == 0) return;
  std::vector<int64_t> index(shape.size(), 0);
  for (;;) {
    f(index);
    int i = static_cast<int>(shape.size()) - 1;
    for (; i >= 0; --i) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
    if (i < 0) return;
  }
}

// True if every element of `a` equals the one at the same index of `b`, bytewise.
inline bool same_elements(const DLTensor& a, const DLTensor& b, std::size_t itemsize) {
  std::vector<int64_t> shape(a.shape, a.shape + a.ndim);
  bool same = true;
  for_each_index(shape, [&](const std::vector<int64_t>& index) {
    if (std::memcmp(element_at(a, index, itemsize), element_at(b, index, itemsize), itemsize) != 0) same = false;
  });
  return same;
}

// Deletes a result tensor at the end of a scope.
struct Owned {
  DLManagedTensorVersioned* t = nullptr;
  explicit Owned(DLManagedTensorVersioned* tensor) : t(tensor) {}
  ~Owned() { reset(); }
  void reset() {
    if (t && t->deleter) t->deleter(t);
    t = nullptr;
  }
  Owned(const Owned&) = delete;
  Owned(Owned&& other) noexcept : t(other.t) { other.t = nullptr; }
  DLTensor& operator*() const { return t->dl_tensor; }
  DLTensor* operator->() const { return &t->dl_tensor; }
};

struct Runtime {
  abr_runtime* rt = nullptr;
  Runtime() { REQUIRE(abr_runtime_create(nullptr, &rt) == ABR_OK); }
  ~Runtime() { abr_runtime_destroy(rt); }
  operator abr_runtime*() const { return rt; }
};

inline bool error_mentions(const char* text) { return std::strstr(abr_last_error(), text) != nullptr; }

// A new copy of `src` on `device`, queued on `stream` (NULL: done when it returns);
// the transfer must succeed.
inline DLManagedTensorVersioned* copy_to(abr_runtime* rt, DLManagedTensorVersioned* src, DLDevice device,
                                         abr_stream* stream) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = ABR_COPY_ALWAYS;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, src, device, &options, stream, &out) == ABR_OK);
  return out;
}

// The runtime's pinned pool statistics (the call must succeed).
inline abr_pool_stats pool_stats(abr_runtime* rt) {
  abr_pool_stats stats = ABR_POOL_STATS_INIT;
  REQUIRE(abr_pool_get_stats(rt, &stats) == ABR_OK);
  return stats;
}

constexpr DLDevice cpu{kDLCPU, 0};

// ARRAYBRIDGE_STAGING_CHUNK_MIB while it lives: a few MiB of data make several
// chunks of a staged transfer (read each time a transfer is planned).
struct StagingChunkMib {
  explicit StagingChunkMib(const char* mib) { setenv("ARRAYBRIDGE_STAGING_CHUNK_MIB", mib, 1); }
  ~StagingChunkMib() { unsetenv("ARRAYBRIDGE_STAGING_CHUNK_MIB"); }
  StagingChunkMib(const StagingChunkMib&) = delete;
  StagingChunkMib& operator=(const StagingChunkMib&) = delete;
};

}  // namespace test
