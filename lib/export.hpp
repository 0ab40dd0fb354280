// Building the DLManagedTensorVersioned that the runtime hands out, and holding
// on to the managed tensor that was handed in.
#pragma once

#include <cstdint>
#include <memory>

#include "arraybridge/arraybridge.h"
#include "lib/dims.hpp"
#include "lib/storage.hpp"

namespace abr {

// Host memory from the runtime, aligned to 256 bytes as DLPack recommends; from
// kHugePageThreshold up, to 2 MiB and backed by huge pages where the kernel can.
class HostBuffer final : public Storage {
 public:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kHugePageThreshold = std::size_t{4} << 20;
  explicit HostBuffer(std::size_t bytes);  // throws ABR_ERR_OUT_OF_MEMORY
  ~HostBuffer() override;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  char* data() const { return data_; }

 private:
  void* allocation_ = nullptr;  // what malloc returned; data_ is it rounded up to the alignment
  char* data_ = nullptr;
};

// A managed tensor handed to the runtime, versioned or legacy. Its deleter runs
// exactly once: when release() is called or when the holder is destroyed, and
// never if the holder was given back with relinquish().
class SourceTensor final : public Storage {
 public:
  explicit SourceTensor(DLManagedTensorVersioned* tensor) : versioned_(tensor) {}
  explicit SourceTensor(DLManagedTensor* tensor) : legacy_(tensor) {}
  ~SourceTensor() override { release(); }
  SourceTensor(const SourceTensor&) = delete;
  SourceTensor& operator=(const SourceTensor&) = delete;
  // Moving hands the obligation to call the deleter over; the moved-from is left empty.
  SourceTensor(SourceTensor&& other) noexcept : versioned_(other.versioned_), legacy_(other.legacy_) {
    other.relinquish();
  }
  SourceTensor& operator=(SourceTensor&&) = delete;

  const DLTensor& tensor() const { return versioned_ ? versioned_->dl_tensor : legacy_->dl_tensor; }
  uint64_t flags() const { return versioned_ ? versioned_->flags : 0; }
  const DLManagedTensorVersioned* versioned() const { return versioned_; }
  // The versioned tensor, handed over: its deleter is now the taker's to call.
  DLManagedTensorVersioned* take_versioned() noexcept {
    DLManagedTensorVersioned* taken = versioned_;
    relinquish();
    return taken;
  }
  void release() noexcept;
  void relinquish() noexcept { versioned_ = nullptr, legacy_ = nullptr; }

 private:
  DLManagedTensorVersioned* versioned_ = nullptr;
  DLManagedTensor* legacy_ = nullptr;
};

struct ExportSpec {
  void* data;
  DLDevice device;
  DLDataType dtype;
  const Dims& shape;    // copied by PendingExport: may refer to temporaries
  const Dims& strides;  // in elements
  uint64_t byte_offset = 0;
  uint64_t flags = 0;
};

struct Exported;

// A managed tensor being built in two steps: allocated first (which may fail, so
// do it before the work it will describe), then handed out owning its storage
// (which cannot fail).
class PendingExport {
 public:
  explicit PendingExport(const ExportSpec& spec);  // throws ABR_ERR_OUT_OF_MEMORY
  ~PendingExport();
  PendingExport(const PendingExport&) = delete;
  PendingExport& operator=(const PendingExport&) = delete;
  void set_data(void* data) noexcept;  // when the memory is made after allocation
  DLManagedTensorVersioned* finish(std::unique_ptr<Storage> storage) noexcept;
  DLManagedTensorVersioned* finish(SourceTensor& source) noexcept;  // owning the source itself

 private:
  std::unique_ptr<Exported> exported_;
};

// Both steps at once: if this throws (out of memory), `storage` is still the caller's.
DLManagedTensorVersioned* export_tensor(const ExportSpec& spec, std::unique_ptr<Storage>&& storage);

// A view that owns `source` (its deleter runs when the view is deleted), in one
// allocation: the zero-copy path. If this throws, `source` is left as it was.
DLManagedTensorVersioned* export_view_of(const ExportSpec& spec, SourceTensor& source);

// A legacy tensor owning a versioned one (deleting it deletes the versioned one).
// Refuses a major version other than 1 and a READ_ONLY tensor, which the legacy
// form cannot describe.
DLManagedTensor* wrap_as_legacy(DLManagedTensorVersioned* tensor);

}  // namespace abr
