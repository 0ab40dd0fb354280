// Host memory running out, one allocation at a time (tests/support/failing_new.cpp
// replaces operator new in the test programs, which link the library statically).
#pragma once

namespace test {

// While this lives, the `after`-th allocation through operator new from now on
// this thread (0: the next) throws std::bad_alloc, once.
struct FailingNew {
  explicit FailingNew(long after);
  ~FailingNew();
  FailingNew(const FailingNew&) = delete;
  FailingNew& operator=(const FailingNew&) = delete;
  bool failed() const;  // whether it has thrown
};

}  // namespace test
