// A caller's enum as the integer it holds. A C caller may pass any int where the
// header says an enum, and reading a value that is no enumerator as the enum is
// undefined (UBSan reports it): so it is read as bytes, then judged as an int.
#pragma once

#include <cstdint>
#include <cstring>

namespace abr {

template <class Enum>
int32_t enum_value(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int32_t), "the C ABI's enums are 32-bit");
  int32_t value = 0;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

}  // namespace abr
