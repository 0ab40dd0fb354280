// Writing and checking the bytes of a CUDA IPC handle (see ipc_handle.hpp).
//
// The checksum is FNV-1a 64: it detects damage (a handle cut short, or changed in a
// copy or a text encoding), with any single changed byte always detected and other
// damage missed once in 2^64. It is no security boundary: anyone can recompute it,
// and CUDA IPC trusts every process of the machine's user anyway.
#include "cuda/ipc_handle.hpp"

#include <unistd.h>

#include <cstring>

#include "lib/base/error.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/platform/process_identity.hpp"

namespace abr::cuda {
namespace {

constexpr char kMagic[7] = {'a', 'b', 'r', '-', 'i', 'p', 'c'};
constexpr std::size_t kChecksumAt = offsetof(IpcPrefix, checksum);

static_assert(sizeof(IpcPrefix) == 24, "the prefix stays the same in every format");
static_assert(sizeof(IpcHandleBody) == 216, "no padding: every byte of a handle is written and checked");
static_assert(sizeof(IpcHandleBody) + 2 * ABR_MAX_NDIM * sizeof(int64_t) <= ABR_IPC_HANDLE_BYTES,
              "the largest handle fits abr_ipc_handle");

uint64_t checksum(const unsigned char* bytes, std::size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < size; ++i) {
    if (i >= kChecksumAt && i < kChecksumAt + sizeof(uint64_t)) continue;
    hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  }
  return hash;
}

std::string version_text(const uint16_t* version) {
  return fmt::format("{}.{}.{}", version[0], version[1], version[2]);
}

constexpr uint16_t kThisVersion[3] = {ABR_VERSION_MAJOR, ABR_VERSION_MINOR, ABR_VERSION_PATCH};

void require_exporter_alive(const IpcHandleBody& body) {
  if (body.exporter_pid <= 0)
    fail(ABR_ERR_INVALID_ARGUMENT, "the IPC handle is damaged: its exporter's pid is {}", body.exporter_pid);
  const std::optional<uint64_t> now = process_start_time(body.exporter_pid);
  if (!now)
    fail(ABR_ERR_INVALID_ARGUMENT,
         "the process that exported this IPC handle (pid {}) has exited, and its memory with it", body.exporter_pid);
  if (*now != body.exporter_start)
    fail(ABR_ERR_INVALID_ARGUMENT,
         "the process that exported this IPC handle (pid {}, started {:.2f} s after boot) has exited, and its "
         "memory with it; pid {} is now another process (started {:.2f} s after boot)",
         body.exporter_pid, seconds_after_boot(body.exporter_start), body.exporter_pid, seconds_after_boot(*now));
}

}  // namespace

uint32_t write_ipc_handle(IpcHandleBody body, const Dims& shape, const Dims& strides, unsigned char* out,
                          std::size_t capacity) {
  const std::size_t dims_bytes = (shape.size() + strides.size()) * sizeof(int64_t);
  if (sizeof body + dims_bytes > capacity) fail(ABR_ERR_INTERNAL, "an IPC handle outgrew abr_ipc_handle");
  const std::optional<uint64_t> started = process_start_time(static_cast<int32_t>(getpid()));
  if (!started)
    fail(ABR_ERR_UNSUPPORTED,
         "cannot read this process's start time from /proc/{}/stat, which an IPC handle carries so that an "
         "importer can tell this process from a later one with its pid (is /proc mounted?)",
         getpid());
  std::memcpy(body.prefix.magic, kMagic, sizeof kMagic);
  body.prefix.format = kIpcFormat;
  std::memcpy(body.prefix.library, kThisVersion, sizeof kThisVersion);
  body.prefix.reserved = 0;
  body.exporter_pid = static_cast<int32_t>(getpid());
  body.exporter_start = *started;
  std::memcpy(out, &body, sizeof body);
  std::memcpy(out + sizeof body, shape.data(), shape.size() * sizeof(int64_t));
  std::memcpy(out + sizeof body + shape.size() * sizeof(int64_t), strides.data(), strides.size() * sizeof(int64_t));
  const std::size_t size = sizeof body + dims_bytes;
  seal_ipc_handle(out, size);
  return static_cast<uint32_t>(size);
}

void seal_ipc_handle(unsigned char* bytes, std::size_t size) {
  if (size < sizeof(IpcPrefix)) return;
  const uint64_t sum = checksum(bytes, size);
  std::memcpy(bytes + kChecksumAt, &sum, sizeof sum);
}

IpcHandleContents read_ipc_handle(const unsigned char* bytes, std::size_t size) {
  IpcPrefix prefix{};
  if (size >= sizeof prefix) std::memcpy(&prefix, bytes, sizeof prefix);
  if (size < sizeof prefix || std::memcmp(prefix.magic, kMagic, sizeof kMagic) != 0)
    fail(ABR_ERR_INVALID_ARGUMENT, "these {} bytes are not an IPC handle from abr_ipc_export", size);
  if (prefix.format < kIpcFormat)
    fail(ABR_ERR_INVALID_ARGUMENT,
         "this IPC handle was written by an older arraybridge (handle format {}); this library ({}) reads format "
         "{}: export the tensor again with this version",
         prefix.format, version_text(kThisVersion), kIpcFormat);
  if (checksum(bytes, size) != prefix.checksum)
    fail(ABR_ERR_INVALID_ARGUMENT,
         "the IPC handle is damaged: its checksum does not match its {} bytes (cut short, or changed on the way)",
         size);
  if (prefix.format > kIpcFormat)
    fail(ABR_ERR_INVALID_ARGUMENT,
         "this IPC handle was written by arraybridge {} (handle format {}); this library ({}) reads format {}: "
         "import it with the exporter's version or newer",
         version_text(prefix.library), prefix.format, version_text(kThisVersion), kIpcFormat);

  IpcHandleContents handle{};
  IpcHandleBody& body = handle.body;
  if (size >= sizeof body) std::memcpy(&body, bytes, sizeof body);
  if (size < sizeof body || body.ndim < 0 || body.ndim > ABR_MAX_NDIM ||
      size != sizeof body + 2 * static_cast<std::size_t>(body.ndim) * sizeof(int64_t))
    fail(ABR_ERR_INVALID_ARGUMENT, "the IPC handle is damaged: {} bytes for {} dimensions", size,
         size < sizeof body ? 0 : body.ndim);
  const std::size_t ndim = static_cast<std::size_t>(body.ndim);
  handle.shape = Dims(ndim);
  handle.strides = Dims(ndim);
  std::memcpy(handle.shape.data(), bytes + sizeof body, ndim * sizeof(int64_t));
  std::memcpy(handle.strides.data(), bytes + sizeof body + ndim * sizeof(int64_t), ndim * sizeof(int64_t));
  // The view must lie inside the allocation, as it did when exported: checked
  // with the offset standing in for the address.
  DLTensor probe{reinterpret_cast<void*>(static_cast<uintptr_t>(body.offset) | 1),
                 {kDLCUDA, 0},
                 body.ndim,
                 body.dtype,
                 handle.shape.data(),
                 handle.strides.data(),
                 0};
  Layout layout;
  try {
    layout = validate_tensor(probe, Role::Source, "its tensor");
  } catch (const Error& e) {  // a DLPack status would blame the caller's tensor: the handle is at fault
    fail(ABR_ERR_INVALID_ARGUMENT, "the IPC handle is damaged: {}", e.what());
  }
  // Written so that no sum can wrap around: the handle's numbers are any numbers.
  const uint64_t before = 0 - static_cast<uint64_t>(layout.min_byte),
                 after = static_cast<uint64_t>(layout.max_byte_end);
  if (layout.numel > 0 &&
      (before > body.offset || after > body.allocation_bytes || body.offset > body.allocation_bytes - after))
    fail(ABR_ERR_INVALID_ARGUMENT, "the IPC handle is damaged: its view reaches outside its {}-byte allocation",
         body.allocation_bytes);
  require_exporter_alive(body);
  return handle;
}

bool exporter_alive(const IpcHandleBody& body) {
  const std::optional<uint64_t> now = process_start_time(body.exporter_pid);
  return body.exporter_pid > 0 && now && *now == body.exporter_start;
}

}  // namespace abr::cuda
