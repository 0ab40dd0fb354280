// Building the DLManagedTensorVersioned that the runtime hands out.
#pragma once

#include <cstdint>
#include <memory>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/dims.hpp"
#include "lib/tensor/source_tensor.hpp"
#include "lib/tensor/storage.hpp"

namespace abr {

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
  DLManagedTensorVersioned* finish_shared(std::shared_ptr<Storage> share) noexcept;  // one owner of memory others share
  DLManagedTensorVersioned* finish(SourceTensor& source) noexcept;                   // owning the source itself

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
