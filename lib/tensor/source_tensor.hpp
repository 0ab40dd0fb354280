// Holding on to the managed tensor a caller handed in, until its deleter is due.
#pragma once

#include <cstdint>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/storage.hpp"

namespace abr {

// A managed tensor handed to the runtime, versioned or legacy. Its deleter runs
// exactly once: when call_deleter() is called or when the holder is destroyed, and
// never once the tensor was given back to its caller with give_back(). (Not
// std::unique_ptr's words: its release() gives up without deleting.)
class SourceTensor final : public Storage {
 public:
  explicit SourceTensor(DLManagedTensorVersioned* tensor) : versioned_(tensor) {}
  explicit SourceTensor(DLManagedTensor* tensor) : legacy_(tensor) {}
  ~SourceTensor() override { call_deleter(); }
  SourceTensor(const SourceTensor&) = delete;
  SourceTensor& operator=(const SourceTensor&) = delete;
  // Moving hands the obligation to call the deleter over; the moved-from is left empty.
  SourceTensor(SourceTensor&& other) noexcept : versioned_(other.versioned_), legacy_(other.legacy_) {
    other.give_back();
  }
  SourceTensor& operator=(SourceTensor&&) = delete;

  const DLTensor& tensor() const { return versioned_ ? versioned_->dl_tensor : legacy_->dl_tensor; }
  uint64_t flags() const { return versioned_ ? versioned_->flags : 0; }
  const DLManagedTensorVersioned* versioned() const { return versioned_; }
  // The versioned tensor, handed over: its deleter is now the taker's to call.
  DLManagedTensorVersioned* take_versioned() noexcept {
    DLManagedTensorVersioned* taken = versioned_;
    give_back();
    return taken;
  }
  // Runs the deleter now (once), and holds nothing after.
  void call_deleter() noexcept {
    if (versioned_ && versioned_->deleter) versioned_->deleter(versioned_);
    if (legacy_ && legacy_->deleter) legacy_->deleter(legacy_);
    give_back();
  }
  // Lets go without calling the deleter: the tensor is its caller's again.
  void give_back() noexcept { versioned_ = nullptr, legacy_ = nullptr; }

 private:
  DLManagedTensorVersioned* versioned_ = nullptr;
  DLManagedTensor* legacy_ = nullptr;
};

// Whether a versioned tensor already reads as the runtime's views do: strides
// given, no byte_offset, not IS_COPIED (the planner may then hand it back as it is).
inline bool reads_as_a_view(const DLManagedTensorVersioned& tensor) {
  return (tensor.dl_tensor.ndim == 0 || tensor.dl_tensor.strides) && tensor.dl_tensor.byte_offset == 0 &&
      !(tensor.flags & DLPACK_FLAG_BITMASK_IS_COPIED);
}

}  // namespace abr
