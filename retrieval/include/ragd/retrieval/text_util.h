// UTF-8 and JSON text helpers used by retrieval and its tools. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ragd/common/utf8.h"  // find_invalid_utf8, utf8_floor: the one copy, shared with the daemon

namespace ragd::retrieval {

// Appends `s` to `out` as a JSON string literal (quotes included); invalid bytes become U+FFFD.
void append_json_string(std::string* out, std::string_view s);

inline bool is_space_byte(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// `s` without the ASCII whitespace at either end.
inline std::string_view trim_space(std::string_view s) {
  while (!s.empty() && is_space_byte(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && is_space_byte(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace ragd::retrieval
