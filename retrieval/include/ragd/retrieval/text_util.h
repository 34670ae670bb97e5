// UTF-8 and JSON text helpers used by retrieval and its tools. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ragd::retrieval {

// Byte offset of the first invalid sequence, or npos when `s` is valid UTF-8 (overlongs,
// surrogates and code points above U+10FFFF are invalid).
size_t find_invalid_utf8(std::string_view s);

// Largest offset <= pos that does not split a UTF-8 sequence.
size_t utf8_floor(std::string_view s, size_t pos);

// Appends `s` to `out` as a JSON string literal (quotes included); invalid bytes become U+FFFD.
void append_json_string(std::string* out, std::string_view s);

inline bool is_space_byte(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace ragd::retrieval
