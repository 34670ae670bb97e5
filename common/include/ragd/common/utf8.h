// UTF-8 helpers: validation, character boundaries, character counts.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

namespace ragd {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when it is invalid (a stray
// continuation byte, a truncated sequence, an overlong form, a surrogate, above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i);

// Byte offset of the first invalid sequence, or npos when `s` is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);

// Largest offset <= pos that does not split a UTF-8 sequence.
size_t utf8_floor(std::string_view s, size_t pos);

// Characters (code points) of valid UTF-8 `s`: the bytes that start one. Check validity first
// (find_invalid_utf8); on invalid input this counts lead and stray bytes.
size_t utf8_length(std::string_view s);

}  // namespace ragd
