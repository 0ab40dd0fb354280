#include "lib/tensor/export.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <optional>

#include "lib/base/error.hpp"
#include "lib/base/fault.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/base/log.hpp"

namespace abr {

struct Exported {
  static constexpr std::size_t kInlineDims = 8;
  DLManagedTensorVersioned managed{};
  std::optional<SourceTensor> source;  // a view's source, held in place (no second allocation)
  std::unique_ptr<Storage> storage;
  std::shared_ptr<Storage> share;        // memory several results share (a batch's block), without a wrapper of its own
  int64_t inline_dims[2 * kInlineDims];  // shape then strides, without a second allocation up to 8 dims
  std::vector<int64_t> more_dims;        // the same beyond
};

namespace {

void delete_exported(DLManagedTensorVersioned* self) noexcept {
  if (!self) return;
  delete static_cast<Exported*>(self->manager_ctx);  // frees self too: it lives inside
}

struct Legacy {
  DLManagedTensor managed{};
  DLManagedTensorVersioned* inner = nullptr;
};

void delete_legacy(DLManagedTensor* self) noexcept {
  if (!self) return;
  Legacy* legacy = static_cast<Legacy*>(self->manager_ctx);
  if (legacy->inner->deleter) legacy->inner->deleter(legacy->inner);
  delete legacy;
}

}  // namespace

PendingExport::PendingExport(const ExportSpec& spec)
    : exported_((fault::point(ABR_ERR_OUT_OF_MEMORY, "export allocation"),
                 std::unique_ptr<Exported>(new Exported))) {  // not make_unique: it would zero the dims arrays
  const std::size_t ndim = spec.shape.size();
  int64_t* dims = exported_->inline_dims;
  if (ndim > Exported::kInlineDims) {
    exported_->more_dims.resize(2 * ndim);
    dims = exported_->more_dims.data();
  }
  std::copy(spec.shape.begin(), spec.shape.end(), dims);
  std::copy(spec.strides.begin(), spec.strides.end(), dims + ndim);

  DLManagedTensorVersioned& m = exported_->managed;
  m.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  m.flags = spec.flags;
  m.deleter = delete_exported;
  m.dl_tensor.data = spec.data;
  m.dl_tensor.device = spec.device;
  m.dl_tensor.ndim = static_cast<int32_t>(ndim);
  m.dl_tensor.dtype = spec.dtype;
  m.dl_tensor.shape = ndim ? dims : nullptr;
  m.dl_tensor.strides = ndim ? dims + ndim : nullptr;
  m.dl_tensor.byte_offset = spec.byte_offset;
  m.manager_ctx = exported_.get();
}

PendingExport::~PendingExport() = default;

void PendingExport::set_data(void* data) noexcept { exported_->managed.dl_tensor.data = data; }

DLManagedTensorVersioned* PendingExport::finish(std::unique_ptr<Storage> storage) noexcept {
  exported_->storage = std::move(storage);
  return &exported_.release()->managed;
}

DLManagedTensorVersioned* PendingExport::finish_shared(std::shared_ptr<Storage> share) noexcept {
  exported_->share = std::move(share);
  return &exported_.release()->managed;
}

DLManagedTensorVersioned* PendingExport::finish(SourceTensor& source) noexcept {
  exported_->source.emplace(std::move(source));
  return &exported_.release()->managed;
}

DLManagedTensorVersioned* export_view_of(const ExportSpec& spec, SourceTensor& source) {
  PendingExport pending(spec);
  return pending.finish(source);
}

DLManagedTensorVersioned* export_tensor(const ExportSpec& spec, std::unique_ptr<Storage>&& storage) {
  PendingExport pending(spec);
  return pending.finish(std::move(storage));
}

DLManagedTensor* wrap_as_legacy(DLManagedTensorVersioned* tensor) {
  validate_header(*tensor, "source");
  if (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    fail(ABR_ERR_READ_ONLY, "a READ_ONLY tensor cannot be expressed as a legacy DLManagedTensor");
  auto legacy = std::make_unique<Legacy>();
  legacy->inner = tensor;
  legacy->managed.dl_tensor = tensor->dl_tensor;
  legacy->managed.manager_ctx = legacy.get();
  legacy->managed.deleter = delete_legacy;
  return &legacy.release()->managed;
}

}  // namespace abr
