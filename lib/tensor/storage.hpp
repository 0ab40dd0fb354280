// Whatever keeps an exported tensor's memory (or a transfer's source) alive.
#pragma once

#include <memory>

namespace abr {

// Destroyed by the exported tensor's deleter, or by a stream once the work that
// used it has completed.
class Storage {
 public:
  virtual ~Storage() = default;
};

// A second owner of shared memory: lets a stream and an exported tensor both hold
// the same buffer, which is freed when the last of them lets go.
class SharedStorage final : public Storage {
 public:
  explicit SharedStorage(std::shared_ptr<Storage> inner) : inner_(std::move(inner)) {}

 private:
  std::shared_ptr<Storage> inner_;
};

}  // namespace abr
