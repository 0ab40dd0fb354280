// Text at the library's edges. The C ABI's fixed-size text fields (names,
// platforms, details): text that does not fit is cut at a word boundary and ends
// with "…", never mid-word or inside a UTF-8 character. And the two steps every
// name parser (devices, dtypes) shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace abr {

// Writes text (or its cut form) and a terminating NUL into field[0, capacity);
// returns the length written.
std::size_t fit_text(char* field, std::size_t capacity, std::string_view text) noexcept;

template <std::size_t N>
void copy_text(char (&field)[N], std::string_view text) noexcept {
  fit_text(field, N, text);
}

// The text without surrounding white space, in lower case: how names are compared.
std::string normalized_name(std::string_view text);

// The file name of a path: what follows its last '/', or the whole text.
std::string_view base_name(std::string_view path) noexcept;

// Reads text that is all decimal digits, at least one, with a value at most max.
bool parse_decimal(std::string_view digits, std::uint64_t max, std::uint64_t* value) noexcept;

}  // namespace abr
