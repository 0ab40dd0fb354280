#include "lib/tensor/source_tensor.hpp"

namespace abr {

void SourceTensor::call_deleter() noexcept {
  if (versioned_ && versioned_->deleter) versioned_->deleter(versioned_);
  if (legacy_ && legacy_->deleter) legacy_->deleter(legacy_);
  give_back();
}

}  // namespace abr
