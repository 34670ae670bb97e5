// UTF-8 helpers: validation, character boundaries, character counts, encoding and decoding.
// The one copy: tokenizers, the template engine, the grammar compiler, retrieval and the daemon
// use these.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ragd {

// True for a continuation byte (10xxxxxx): a byte that does not start a character.
constexpr bool utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when it is invalid (a stray
// continuation byte, a truncated sequence, an overlong form, a surrogate, above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i);

// Same, but an invalid byte counts as one: the step of a walk that goes on over bad bytes.
size_t utf8_char_len(std::string_view s, size_t i);

// Byte offset of the first invalid sequence, or npos when `s` is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);

// Largest offset <= pos that does not split a UTF-8 sequence.
size_t utf8_floor(std::string_view s, size_t pos);

// Characters (code points) of valid UTF-8 `s`: the bytes that start one. Check validity first
// (find_invalid_utf8); on invalid input this counts lead and stray bytes.
size_t utf8_length(std::string_view s);

// The character starting at s[i] (i < s.size()); *len gets its byte length. An invalid byte
// decodes to U+FFFD with *len = 1.
char32_t utf8_decode_at(std::string_view s, size_t i, size_t* len);

// UTF-8 -> code points; each invalid byte becomes U+FFFD.
std::u32string utf8_decode(std::string_view s);

// Appends the 1..4-byte encoding of `cp` (by its magnitude; cp <= U+10FFFF). Surrogates are
// encoded as given: callers that must produce valid UTF-8 leave them out.
void append_utf8(std::string& out, char32_t cp);

// Code points -> UTF-8 (append_utf8 of each).
std::string utf8_encode(std::u32string_view s);

// Copy of `s` with each invalid byte replaced by U+FFFD (EF BF BD).
std::string sanitize_utf8(std::string_view s);

}  // namespace ragd
