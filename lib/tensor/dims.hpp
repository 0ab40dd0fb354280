// Extents or strides of a tensor. Up to 8 dimensions live inline, so validating
// and exporting a tensor allocates nothing for them (a zero-copy transfer is
// dominated by allocations otherwise); more go to the heap.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace abr {

class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  Dims(const int64_t* first, const int64_t* last) { assign(first, last); }
  explicit Dims(std::size_t n, int64_t value = 0) {
    resize(n);
    std::fill(begin(), end(), value);
  }
  // Copies touch only the dims in use: the inline slots past size() are never written.
  Dims(const Dims& other) { assign(other.begin(), other.end()); }
  Dims(Dims&& other) noexcept : heap_(std::move(other.heap_)), size_(other.size_) {
    if (size_ <= kInline) std::copy(other.inline_, other.inline_ + size_, inline_);
  }
  Dims& operator=(const Dims& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Dims& operator=(Dims&& other) noexcept {
    if (this == &other) return *this;
    heap_ = std::move(other.heap_);
    size_ = other.size_;
    if (size_ <= kInline) std::copy(other.inline_, other.inline_ + size_, inline_);
    return *this;
  }

  void assign(const int64_t* first, const int64_t* last) {
    resize(static_cast<std::size_t>(last - first));
    int64_t* out = begin();
    // Element by element: a tensor has a few dims, and a call to memcpy (what
    // std::copy becomes) cost more than the copy itself.
    for (std::size_t i = 0; i < size_; ++i) out[i] = first[i];
  }
  void resize(std::size_t n) {  // new elements are unspecified
    if (n > kInline) heap_.resize(n);
    size_ = n;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return size_ > kInline ? heap_.data() : inline_; }
  const int64_t* data() const { return size_ > kInline ? heap_.data() : inline_; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t& operator[](std::size_t i) { return data()[i]; }
  int64_t operator[](std::size_t i) const { return data()[i]; }

  friend bool operator==(const Dims& a, const Dims& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }

 private:
  static constexpr std::size_t kInline = 8;
  int64_t inline_[kInline];  // the first size() are in use when size() <= kInline
  std::vector<int64_t> heap_;
  std::size_t size_ = 0;
};

}  // namespace abr
