#include "lib/base/text.hpp"

#include <cctype>
#include <cstring>

namespace abr {
namespace {

constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // "…" in UTF-8

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }
bool trailing_junk(char c) { return c == ' ' || c == ',' || c == ';' || c == ':' || c == '(' || c == '-'; }

}  // namespace

std::size_t fit_text(char* field, std::size_t capacity, std::string_view text) noexcept {
  if (capacity == 0) return 0;
  std::size_t size = text.size();
  if (size < capacity) {
    std::memcpy(field, text.data(), size);
  } else if (capacity <= kEllipsis.size() + 1) {
    size = 0;  // no room for a word and the mark
  } else {
    const std::size_t room = capacity - 1 - kEllipsis.size();
    // The last word that ends within the room (text[cut] is the space after it);
    // a single word longer than the room is cut where the room ends.
    std::size_t cut = room;
    while (cut > 0 && text[cut] != ' ') --cut;
    if (cut == 0) cut = room;
    while (cut > 0 && (trailing_junk(text[cut - 1]) || continuation_byte(text[cut]))) --cut;
    std::memcpy(field, text.data(), cut);
    std::memcpy(field + cut, kEllipsis.data(), kEllipsis.size());
    size = cut + kEllipsis.size();
  }
  field[size] = '\0';
  return size;
}

std::string_view base_name(std::string_view path) noexcept {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string normalized_name(std::string_view text) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool parse_decimal(std::string_view digits, std::uint64_t max, std::uint64_t* value) noexcept {
  if (digits.empty()) return false;
  std::uint64_t result = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    result = result * 10 + static_cast<std::uint64_t>(c - '0');
    if (result > max) return false;  // checked each digit, so it never wraps for max < 2^60
  }
  *value = result;
  return true;
}

}  // namespace abr
