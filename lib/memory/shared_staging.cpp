#include "lib/memory/shared_staging.hpp"

namespace abr {
namespace {

class SharedBlock final : public StagingBlock {
 public:
  SharedBlock(std::unique_ptr<StagingBlock> block, std::unique_ptr<HostRegistration> registration)
      : block_(std::move(block)), registration_(std::move(registration)) {}
  char* data() const override { return block_->data(); }
  std::size_t size() const override { return block_->size(); }

 private:
  // Declared in this order so that the registration ends before the memory goes.
  std::unique_ptr<StagingBlock> block_;
  std::unique_ptr<HostRegistration> registration_;
};

}  // namespace

std::unique_ptr<StagingBlock> SharedStagingProvider::allocate(std::size_t bytes) {
  std::unique_ptr<StagingBlock> block = blocks_.allocate(bytes);
  std::unique_ptr<HostRegistration> registration = registrar_.register_host(block->data(), block->size());
  return std::make_unique<SharedBlock>(std::move(block), std::move(registration));
}

}  // namespace abr
